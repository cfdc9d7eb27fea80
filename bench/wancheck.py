#!/usr/bin/python3
"""Checks the emulated WAN link (tests/support/wanlink.py) against its
settings with curl through it to a local nginx: a fresh connection's first
byte (2 RTT: handshake + request), a reused connection's (1 RTT), and the
rate of a 64 MiB body.  Median of --repeat runs; prints a Markdown table.

    bench/wancheck.py [--repeat 3] [--out bench/results/host/wanlink.md]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tests.support.nginx import Nginx  # noqa: E402
from tests.support.wanlink import LINKS, WanLink  # noqa: E402

BODY = 64 << 20
FORMAT = "%{time_starttransfer} %{time_total} %{size_download}\\n"


def curl(port, *paths):
    """(first byte, total, bytes) of each path, one connection for all."""
    out = subprocess.run(["curl", "-sf", "-w", FORMAT] +
                         [x for p in paths for x in ("-o", "/dev/null",
                                                     f"http://127.0.0.1:{port}/{p}")],
                         capture_output=True, text=True, check=True).stdout
    return [tuple(map(float, line.split())) for line in out.splitlines()]


def measure(origin_port, link, repeat):
    rows = {"fresh": [], "reused": [], "rate": []}
    with WanLink("127.0.0.1", origin_port, link) as wan:
        for _ in range(repeat):
            (fresh, _, _), (reused, _, _) = curl(wan.port, "small", "small")
            rows["fresh"].append(fresh / wan.rtt)
            rows["reused"].append(reused / wan.rtt)
            ((first, total, size),) = curl(wan.port, "big")
            rows["rate"].append(size * 8 / (total - first) / 1e6 / wan.rate_mbit)
    return {k: statistics.median(v) for k, v in rows.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", help="also write the table here")
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="httphsm-wancheck-")
    with open(os.path.join(root, "big"), "wb") as f:
        f.write(os.urandom(BODY))
    with open(os.path.join(root, "small"), "w") as f:
        f.write("x\n")
    nginx = Nginx(root)
    lines = ["| link | RTT | rate | fresh connection, first byte | reused, first byte "
             "| body rate / set rate |",
             "| --- | --- | --- | --- | --- | --- |"]
    try:
        for link, (rtt, rate) in LINKS.items():
            m = measure(nginx.port, link, args.repeat)
            lines.append(f"| {link} | {rtt:g} ms | {rate:g} Mbit/s | {m['fresh']:.2f} RTT "
                         f"(model: 2) | {m['reused']:.2f} RTT (model: 1) | {m['rate']:.2f} |")
    finally:
        nginx.stop()
        subprocess.run(["rm", "-rf", root])
    table = "\n".join(lines) + "\n"
    print(table)
    if args.out:
        with open(args.out, "w") as f:
            f.write(f"Emulated WAN link, median of {args.repeat} (bench/wancheck.py)\n\n"
                    + table)


if __name__ == "__main__":
    main()
