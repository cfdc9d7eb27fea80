#!/usr/bin/env python3
"""What a mapping costs, on a fresh mount of the 1.3 GB test tar:
  touch   a program maps it and reads 10 bytes (5 at offset 0, 5 at
          100,000,000), as file(1), zip readers or loaders do (time from
          mmap to the last byte);
  rg      ripgrep through a mapping (rg --mmap -m1) finds the first member
          named Documentation/Makefile, 2.3 MB in (time of the command;
          where ripgrep is installed);
drop_caches before each; time and the bytes nginx sent for the tar, median
of --repeat runs, for:

  local               the tar on local disk
  httphsm-fuse        FUSE mode (faults become FUSE reads of what they touch)
  httphsm-fanotify    fanotify mode, --mmap lazy (page fault events: the
                      patched kernel; mainline falls back to whole)
  httphsm-fanotify-whole  fanotify mode, --mmap whole (mainline's rule)

    bench/mmap.py [--repeat N] [--out DIR]

Writes DIR/mmap.md (default bench/results/host).  Needs root: the caches
live on an ext4 image loop-mounted for the run (fanotify mode needs it; the
guest's /var/tmp cannot hold FUSE mode's cache either).  Inside the QEMU
guest, with the patched kernel:
    scripts/vm-run --mem 6144 --share "$PWD" --share "$(python3
      tests/support/tree.py)" -- python3 bench/mmap.py --out "$PWD/bench/results/vm"
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

from support.mount import Mount, walk_to  # noqa: E402
from support.nginx import Nginx  # noqa: E402
from support.tree import BIG_TAR, make_tree  # noqa: E402

OFFSETS = (0, 100_000_000)
TOUCH = """
import mmap, os, sys, time
start = time.monotonic()
fd = os.open(sys.argv[1], os.O_RDONLY)
mm = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
data = b"".join(mm[o:o + 5] for o in (%s))
print(time.monotonic() - start, data.hex())
""" % ", ".join(map(str, OFFSETS))

CONTENDERS = {
    "local": None,
    "httphsm-fuse": ("fuse", []),
    "httphsm-fanotify": ("fanotify", ["--mmap", "lazy"]),
    "httphsm-fanotify-whole": ("fanotify", ["--mmap", "whole"]),
}


def drop_caches():
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def touch(path):
    drop_caches()
    out = subprocess.run([sys.executable, "-c", TOUCH, path], capture_output=True,
                         text=True, timeout=900, check=True).stdout.split()
    return float(out[0]), out[1]


def rg(path):
    drop_caches()
    start = time.monotonic()
    out = subprocess.run(["rg", "--mmap", "-a", "-m1", "-o", "-b",
                          "linux-source-6.1/Documentation/Makefile", path],
                         capture_output=True, text=True, timeout=900, check=True).stdout
    return time.monotonic() - start, out.split(":")[0]


# rg where installed (the guest image has it)
WORKLOADS = {"touch": touch, **({"rg": rg} if shutil.which("rg") else {})}


class Ext4:
    """A loop-mounted ext4 for fanotify mode's caches."""

    def __init__(self, workdir):
        self.image, self.mnt = os.path.join(workdir, "ext4.img"), os.path.join(workdir, "ext4")
        os.makedirs(self.mnt)
        subprocess.run(["truncate", "-s", "4G", self.image], check=True)
        subprocess.run(["mkfs.ext4", "-q", "-F", self.image], check=True)
        subprocess.run(["mount", "-o", "loop", self.image, self.mnt], check=True)

    def close(self):
        subprocess.run(["umount", "-l", self.mnt])


def run_once(name, workload, server, tree_root, workdir, ext4):
    if CONTENDERS[name] is None:
        seconds, data = workload(os.path.join(tree_root, "pub", BIG_TAR))
        return seconds, data, 0
    mode, args = CONTENDERS[name]
    base = tempfile.mkdtemp(dir=ext4.mnt)
    m = Mount(server.url + "pub/", os.path.join(workdir, f"mnt-{os.path.basename(base)}"),
              os.path.join(base, "cache"), mode=mode, args=args)
    try:
        walk_to(m.mountpoint, BIG_TAR)
        lazy = mode != "fanotify" or "mappings: lazy" in m.log()
        server.settle()
        server.clear_log()
        seconds, data = workload(m.path(*BIG_TAR.split("/")))
        server.settle()
        sent = server.bytes_sent(BIG_TAR)
    finally:
        m.umount()
        shutil.rmtree(base, ignore_errors=True)
    return seconds, data + ("" if lazy else " (whole: no fault events)"), sent


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default=os.path.join(HERE, "results", "host"))
    opts = parser.parse_args()
    tree_root = make_tree()
    workdir = tempfile.mkdtemp(prefix="httphsm-mmap-", dir="/var/tmp")
    server = Nginx(tree_root, exact_size=True)
    ext4 = Ext4(workdir)
    runs = {(w, name): [] for w in WORKLOADS for name in CONTENDERS}
    try:
        for i in range(opts.repeat):
            names = list(CONTENDERS)
            for name in names[i % len(names):] + names[:i % len(names)]:
                for w, workload in WORKLOADS.items():
                    runs[w, name].append(run_once(name, workload, server, tree_root,
                                                  workdir, ext4))
    finally:
        server.stop()
        ext4.close()
        shutil.rmtree(workdir, ignore_errors=True)
    size = os.path.getsize(os.path.join(tree_root, "pub", BIG_TAR))
    lines = [f"The {size:,} byte test tar through a mapping, fresh mount each run, "
             f"medians of {opts.repeat}, kernel {os.uname().release}"]
    for w in WORKLOADS:
        lines += ["", f"{w}:", "",
                  "| contender | time | vs FUSE | bytes fetched | result right |",
                  "|---|---|---|---|---|"]
        fuse = statistics.median(r[0] for r in runs[w, "httphsm-fuse"])
        local_data = runs[w, "local"][0][1]
        for name in CONTENDERS:
            results = runs[w, name]
            seconds = statistics.median(r[0] for r in results)
            sent = statistics.median(r[2] for r in results)
            right = all(r[1].split()[0] == local_data for r in results)
            note = next((r[1].split(" ", 1)[1] for r in results if " " in r[1]), "")
            lines.append(f"| {name} | {seconds * 1000:.1f} ms | {seconds / fuse:.2f}x | "
                         f"{sent:,.0f} | {'yes' if right else 'NO'} {note}|")
    os.makedirs(opts.out, exist_ok=True)
    with open(os.path.join(opts.out, "mmap.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
