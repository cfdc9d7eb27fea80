#!/usr/bin/env python3
"""A directory of a million entries: time and daemon memory of its first `ls -l`.

    bench/hugedir.py [--entries N] [--modes fuse,fanotify] [--out FILE.md]

nginx serves a generated autoindex-style page (exact sizes and mtimes, so
no HEAD is needed) as the listing of /big/.  For each mode, from a fresh
mount: the first `ls -l` (listing fetched, parsed and turned into cache
entries), a second one (all local), and the daemon's peak and final RSS.
The floor is `ls -l` of the cache directory itself (a local directory of
the same entries) plus the page's transfer time by curl; the goal is a
first `ls -l` within 3x of it and at most 250 bytes of daemon memory per
entry.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
from support.mount import Mount  # noqa: E402
from support.nginx import Nginx  # noqa: E402


def write_page(path, entries):
    with open(path, "w") as out:
        out.write('<html><head><title>Index of /big/</title></head><body>\n'
                  '<h1>Index of /big/</h1><hr><pre><a href="../">../</a>\n')
        for i in range(entries):
            name = f"{i:07d}"  # short names: the page stays under --max-listing's 64 MiB
            out.write(f'<a href="{name}">{name}</a> 02-Dec-2026 10:20 {i * 7919 % 10_000_000:8d}\n')
        out.write("</pre><hr></body></html>\n")


def timed_ls(path):
    start = time.monotonic()
    subprocess.run(["ls", "-l", path], stdout=subprocess.DEVNULL, check=True, timeout=3600)
    return time.monotonic() - start


def rss_kib(pid):
    values = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmHWM", "VmRSS"):
                values[key] = int(rest.split()[0])
    return values


def transfer_time(url):
    out = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{time_total}", url],
                         capture_output=True, text=True, check=True)
    return float(out.stdout)


def fresh_ext4(work):
    image, mnt = os.path.join(work, "fs.img"), os.path.join(work, "fs")
    os.makedirs(mnt)
    subprocess.run(["truncate", "-s", "8G", image], check=True)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-N", "2500000", image], check=True)
    subprocess.run(["mount", "-o", "loop", image, mnt], check=True)
    return mnt


def run_mode(mode, url, work, entries):
    base = fresh_ext4(os.path.join(work, mode))
    m = Mount(url, os.path.join(base, "mnt"), os.path.join(base, "cache"), mode=mode,
              args=[])
    try:
        before = rss_kib(m.pid)
        first = timed_ls(m.path("big"))
        after_first = rss_kib(m.pid)
        second = timed_ls(m.path("big"))
        local = timed_ls(os.path.join(m.cache_dir, "tree", "big"))
        count = len(os.listdir(m.path("big")))
        return {
            "mode": mode, "entries": count, "first": first, "second": second, "local": local,
            "rss_start_kib": before["VmRSS"], "rss_peak_kib": after_first["VmHWM"],
            "rss_after_kib": after_first["VmRSS"],
        }
    finally:
        m.umount()
        subprocess.run(["umount", "-l", base])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--modes", default="fuse,fanotify")
    parser.add_argument("--out", help="append the Markdown table to this file")
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="httphsm-hugedir-")
    www = os.path.join(work, "www")
    os.makedirs(os.path.join(www, "big"))
    write_page(os.path.join(www, "big", "index.html"), args.entries)
    page_bytes = os.path.getsize(os.path.join(www, "big", "index.html"))
    nginx = Nginx(www)
    rows = []
    try:
        transfer = min(transfer_time(nginx.url + "big/") for _ in range(3))
        for mode in args.modes.split(","):
            rows.append(run_mode(mode, nginx.url, work, args.entries))
    finally:
        nginx.stop()

    lines = [
        f"`ls -l` of a directory of {args.entries:,} entries (listing page "
        f"{page_bytes / 1e6:.1f} MB, transferred by curl in {transfer:.2f} s), fresh mount; "
        "floor = `ls -l` of the cache directory + transfer; memory = daemon RSS, "
        "peak minus at start, per entry.",
        "",
        "| mode | entries | first `ls -l` | floor | first / floor | second `ls -l` "
        "| peak RSS | bytes/entry (peak) | bytes/entry (after) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        floor = r["local"] + transfer
        per_peak = (r["rss_peak_kib"] - r["rss_start_kib"]) * 1024 / max(r["entries"], 1)
        per_after = (r["rss_after_kib"] - r["rss_start_kib"]) * 1024 / max(r["entries"], 1)
        lines.append(
            f"| {r['mode']} | {r['entries']:,} | {r['first']:.1f} s | {floor:.1f} s "
            f"| {r['first'] / floor:.1f}x | {r['second']:.1f} s "
            f"| {r['rss_peak_kib'] / 1024:.0f} MiB | {per_peak:.0f} | {per_after:.0f} |")
    table = "\n".join(lines) + "\n"
    print(table)
    if args.out:
        with open(args.out, "a") as f:
            f.write(table + "\n")


if __name__ == "__main__":
    main()
