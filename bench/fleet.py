#!/usr/bin/env python3
"""Many clients, one origin: what the origin sends and how long the clients
take, for 1 and 8 httphsm clients (FUSE), each listing the head of the big
tar (`tar tvf | head -20`) and reading a 64 MiB file, all at once:

  direct   every client fetches from the origin itself;
  cache    the clients go through the caching nginx of docs/nginx-cache.conf
           (cold at the start of each run), on the clients' side of the link.

    bench/fleet.py [--link none,W1] [--repeat N] [--out DIR]

The origin sits behind the link (tests/support/wanlink.py; none = loopback);
the clients and the cache are on loopback.  Figures are medians of --repeat
runs (default 3).  Writes DIR/fleet.json and DIR/fleet.md (default
bench/results/host).  Needs root (mounts).
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

from support.httpcache import CachingNginx  # noqa: E402
from support.mount import Mount, walk_to  # noqa: E402
from support.nginx import Nginx  # noqa: E402
from support.tree import BIG_TAR, make_tree  # noqa: E402
from support.wanlink import LINKS, WanLink  # noqa: E402

MiB = 1024 * 1024
FILE_SIZE = 64 * MiB


def make_origin_root(tree_root, workdir):
    pub = os.path.join(workdir, "origin", "pub")
    os.makedirs(pub)
    with open(os.path.join(pub, "big.bin"), "wb") as f:
        f.write(os.urandom(FILE_SIZE))
    os.symlink(os.path.join(tree_root, "pub", BIG_TAR), os.path.join(pub, "linux.tar"))
    return os.path.join(workdir, "origin")


def client_work(mount):
    subprocess.run(f"tar tvf {mount.path('linux.tar')} | head -20 >/dev/null", shell=True,
                   check=True, timeout=600)
    with open(mount.path("big.bin"), "rb") as f:
        while f.read(4 * MiB):
            pass


def one_run(origin, url, clients, workdir):
    mounts = []
    try:
        for i in range(clients):
            base = tempfile.mkdtemp(dir=workdir)
            mounts.append(Mount(url, os.path.join(base, "mnt"), os.path.join(base, "cache")))
        for m in mounts:
            walk_to(m.mountpoint, "linux.tar")
        origin.clear_log()
        start = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(clients) as pool:
            list(pool.map(client_work, mounts))
        wall = time.monotonic() - start
        origin.settle(quiet=1.0)
        return wall, origin.bytes_sent("big.bin") + origin.bytes_sent("linux.tar")
    finally:
        for m in mounts:
            m.umount()


def measure(origin, link, setup, clients, repeat, workdir):
    runs = []
    for _ in range(repeat):
        cache = CachingNginx(link["url"]) if setup == "cache" else None
        try:
            runs.append(one_run(origin, (cache.url if cache else link["url"]) + "pub/",
                                clients, workdir))
        finally:
            if cache:
                cache.stop()
    return {"wall_s": statistics.median(r[0] for r in runs),
            "origin_bytes": statistics.median(r[1] for r in runs),
            "runs": runs}


def render(results):
    lines = ["| link | clients | setup | wall time | origin bytes | per client |",
             "|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['link']} | {r['clients']} | {r['setup']} | {r['wall_s']:.2f} s | "
                     f"{r['origin_bytes'] / MiB:.1f} MiB | "
                     f"{r['origin_bytes'] / MiB / r['clients']:.1f} MiB |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--link", default="none,W1")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default=os.path.join(HERE, "results", "host"))
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="httphsm-fleet-")
    origin = Nginx(make_origin_root(make_tree(), workdir))
    results = []
    try:
        for name in args.link.split(","):
            relay = WanLink("127.0.0.1", origin.port, name) if name in LINKS else None
            link = {"url": f"http://127.0.0.1:{relay.port}/" if relay else origin.url}
            try:
                for clients in (1, 8):
                    for setup in ("direct", "cache"):
                        r = measure(origin, link, setup, clients, args.repeat, workdir)
                        r.update(link=name, clients=clients, setup=setup)
                        results.append(r)
                        print(render(results[-1:]).splitlines()[-1], flush=True)
            finally:
                if relay:
                    relay.stop()
    finally:
        origin.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "fleet.json"), "w") as f:
        json.dump(results, f, indent=1)
    with open(os.path.join(args.out, "fleet.md"), "w") as f:
        f.write(render(results))
    print(render(results))


if __name__ == "__main__":
    main()
