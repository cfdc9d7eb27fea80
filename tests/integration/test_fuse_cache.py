"""The cache under stress: concurrent readers, and a daemon killed mid-read."""
import configparser
import hashlib
import os
import subprocess
import sys
import threading
import time

import pytest

from support.files import MiB, sha256
from support.tree import BIG_TAR

pytestmark = pytest.mark.timeout(600)

# Reads a file sequentially at about 100 MiB/s, so the whole of BIG_TAR takes
# over ten seconds and a kill lands while fetching is still going on.
SLOW_READER = """
import sys, time
with open(sys.argv[1], "rb", buffering=0) as f:
    while f.read(1 << 20):
        time.sleep(0.01)
"""


def state_of(cache_dir, relpath):
    """The saved state of relpath (see core/store.h), or None."""
    key = hashlib.sha256(relpath.encode()).hexdigest()
    path = os.path.join(cache_dir, "state", key[:2], key)
    if not os.path.exists(path):
        return None
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(path)
    return parser["file"] if "file" in parser else parser["dir"]


def present_ranges(cache_dir, relpath):
    state = state_of(cache_dir, relpath)
    if not state or not state.get("present"):
        return []
    return [tuple(int(x) for x in r.split("-")) for r in state["present"].split(",")]


def present_bytes(ranges):
    return sum(end - start for start, end in ranges)


def test_concurrent_readers_share_one_fetch(mounted, nginx, tree_root):
    path = mounted.path(BIG_TAR)
    offset = 700 * MiB + 12345
    with open(os.path.join(tree_root, "pub", BIG_TAR), "rb") as f:
        f.seek(offset)
        expected = f.read(64 * 1024)
    os.stat(path)
    nginx.clear_log()
    barrier = threading.Barrier(8)
    results = []

    def reader():
        fd = os.open(path, os.O_RDONLY)
        barrier.wait()
        results.append(os.pread(fd, 64 * 1024, offset))
        os.close(fd)

    threads = [threading.Thread(target=reader) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert results == [expected] * 8
    gets = [r for r in nginx.requests() if r.uri.endswith(BIG_TAR)]
    assert len(gets) == 1, gets
    assert gets[0].bytes <= 512 * 1024


def test_kill_9_mid_read_never_yields_unfetched_bytes(nginx, mount_factory, tree_root, tmp_path):
    original = os.path.join(tree_root, "pub", BIG_TAR)
    size = os.path.getsize(original)
    cache = str(tmp_path / "cache")
    m = mount_factory(nginx.url + "pub/", name="first", cache=cache)
    nginx.clear_log()
    reader = subprocess.Popen([sys.executable, "-c", SLOW_READER, m.path(BIG_TAR)],
                              stderr=subprocess.DEVNULL)
    # Kill only once the flusher has saved a state mid-fetch: a fixed sleep
    # raced the first fdatasync of hundreds of MiB on a slow disk.
    deadline = time.time() + 120
    while present_bytes(present_ranges(cache, BIG_TAR)) < 64 * MiB and time.time() < deadline:
        time.sleep(0.05)
    m.kill()
    reader.wait(60)
    m.umount()

    # Every range the state calls present holds the server's bytes.
    ranges = present_ranges(cache, BIG_TAR)
    present = present_bytes(ranges)
    assert 0 < present < size
    cached = os.path.join(cache, "tree", BIG_TAR)
    with open(original, "rb") as want, open(cached, "rb") as got:
        for start, end in ranges:
            for pos in range(start, end, 16 * MiB):
                n = min(16 * MiB, end - pos)
                want.seek(pos)
                got.seek(pos)
                assert got.read(n) == want.read(n), f"bytes {pos}-{pos + n} differ"

    # A new daemon on the same cache fetches only what was missing.
    nginx.clear_log()
    m2 = mount_factory(nginx.url + "pub/", name="second", cache=cache)
    assert sha256(m2.path(BIG_TAR)) == sha256(original)
    refetched = nginx.bytes_sent(BIG_TAR)
    # Fetches start on a quarter of the 256 KiB grid (--min-window), so each
    # hole may begin with up to 64 KiB that are present already.
    grain = 64 * 1024
    assert size - present <= refetched <= size - present + len(ranges) * grain + grain
