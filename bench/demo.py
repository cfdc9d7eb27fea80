#!/usr/bin/env python3
"""The tar-listing demo: serve a kernel.org-like tree from a local nginx,
mount it with httphsm, list the head of a 1.3 GB tar, count the bytes.

    bench/demo.py [--mode fuse|fanotify] [--keep]
"""
import argparse
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from support.mount import Mount  # noqa: E402
from support.nginx import Nginx  # noqa: E402
from support.tree import BIG_TAR, make_tree  # noqa: E402


def human(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n} B"
        n /= 1024


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", default="fuse", choices=["fuse", "fanotify"])
    parser.add_argument("--workdir", default="/tmp/httphsm-demo")
    parser.add_argument("--keep", action="store_true",
                        help="leave nginx and the mount running (until Enter is pressed)")
    args = parser.parse_args()

    print("Preparing the tree (once: a 1.3 GB tar of Debian's linux-source-6.1)...")
    root = make_tree()
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    nginx = Nginx(root, exact_size=False)
    url = nginx.url + "pub/"
    print(f"nginx serves {root}/pub at {url} (rounded sizes, as kernel.org)")
    mount = None
    try:
        mount = Mount(url, os.path.join(args.workdir, "mnt"),
                      os.path.join(args.workdir, "cache"), mode=args.mode)
        print(f"httphsm ({args.mode} mode) mounted it on {mount.mountpoint}\n")
        tar = mount.path(BIG_TAR)
        size = os.path.getsize(tar)
        nginx.clear_log()
        print(f"$ tar tvf {tar} | head -20")
        start = time.monotonic()
        out = subprocess.run(f"tar tvf '{tar}' | head -20", shell=True, check=True,
                             capture_output=True, text=True).stdout
        elapsed = time.monotonic() - start
        print(out, end="")
        fetched = nginx.bytes_sent(BIG_TAR)
        requests = [r for r in nginx.requests() if r.uri.endswith(BIG_TAR)]
        print(f"\n20 entries in {elapsed:.3f} s; fetched {human(fetched)} of the "
              f"{human(size)} tar ({100.0 * fetched / size:.3f}%) in {len(requests)} "
              f"range requests.")
        if args.keep:
            input(f"\n{mount.mountpoint} stays mounted; press Enter to unmount...")
    finally:
        if mount:
            mount.umount()
        nginx.stop()


if __name__ == "__main__":
    main()
