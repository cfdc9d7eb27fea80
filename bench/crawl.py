#!/usr/bin/env python3
"""How long --populate eager takes to list a tree: the test tree (5,000
files in a few directories) on loopback and through W1, and a synthetic tree
of 100,000 directories (100 x 1,000, each with one file) on loopback.

    bench/crawl.py [--out DIR]

FUSE mode (the crawl is the same in both modes); each run on a fresh cache,
timed from the mount command's start to `httphsm status` saying done.
Writes DIR/crawl.md (default bench/results/host).  Needs root.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

from support.mount import Mount, httphsm_binary  # noqa: E402
from support.nginx import Nginx  # noqa: E402
from support.tree import make_tree  # noqa: E402
from support.wanlink import WanLink  # noqa: E402


def make_wide_tree(root, top=100, below=1000):
    pub = os.path.join(root, "pub")
    for i in range(top):
        for j in range(below):
            d = os.path.join(pub, f"d{i:03}", f"e{j:04}")
            os.makedirs(d)
            with open(os.path.join(d, "f"), "w") as f:
                f.write("x")
    return root


def crawl(url, workdir, spec):
    base = tempfile.mkdtemp(dir=workdir)
    start = time.monotonic()
    m = Mount(url, os.path.join(base, "mnt"), os.path.join(base, "cache"),
              args=["--populate", spec])
    try:
        while True:
            out = subprocess.run([httphsm_binary(), "status", m.mountpoint],
                                 capture_output=True, text=True).stdout
            line = next((x for x in out.splitlines() if x.startswith("crawl")), "")
            if "; going" not in line:
                return time.monotonic() - start, int(line.split()[1])
            time.sleep(0.05)
    finally:
        m.umount()
        shutil.rmtree(base, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.path.join(HERE, "results", "host"))
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="httphsm-crawl-")
    rows = []
    try:
        test_tree = Nginx(make_tree())
        seconds, dirs = crawl(test_tree.url + "pub/", workdir, "eager:10")
        rows.append(("test tree", "loopback", dirs, seconds))
        relay = WanLink("127.0.0.1", test_tree.port, "W1")
        seconds, dirs = crawl(f"http://127.0.0.1:{relay.port}/pub/", workdir, "eager:10")
        rows.append(("test tree", "W1 (50 ms)", dirs, seconds))
        relay.stop()
        test_tree.stop()
        wide = Nginx(make_wide_tree(os.path.join(workdir, "wide")))
        seconds, dirs = crawl(wide.url + "pub/", workdir, "eager:2:200000")
        rows.append(("100 x 1,000 directories", "loopback", dirs, seconds))
        wide.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    lines = ["| tree | link | directories listed | time | directories/s |",
             "|---|---|---:|---:|---:|"]
    lines += [f"| {t} | {link} | {d:,} | {s:.2f} s | {d / s:,.0f} |" for t, link, d, s in rows]
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "crawl.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
