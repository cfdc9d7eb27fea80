"""--cache-max-size: a tree four times the limit, read end to end through a
real nginx, keeps the cache within the limit plus what the file being read
holds, with every byte right; files read again come back from the server.
A full cache file system (no limit set) evicts and writes again; a file
larger than the whole file system fails with ENOSPC, not EIO or zeros.

FUSE mode keeps its cache on a small tmpfs (so going far over the limit
would fail with ENOSPC); fanotify mode on the tests' ext4 image."""
import errno
import os
import subprocess
import threading
import time

import pytest

from support.files import MiB, sha256
from support.mount import httphsm_binary, walk_to
from support.nginx import Nginx

pytestmark = pytest.mark.timeout(600)

FILES = 25
FILE_SIZE = 8 * MiB
LIMIT = 48 * MiB
# A file being read is open, so not evictable: the cache may hold the limit
# and that file (read-ahead stays within it), and what arrives while the
# evicting thread catches up (well under a MiB).
BOUND = LIMIT + FILE_SIZE + MiB


def cache_line(status):
    """The fields of status's "cache USED / LIMIT" line."""
    return next(line.split() for line in status.splitlines() if line.startswith("cache "))


@pytest.fixture(scope="module")
def origin(tmp_path_factory):
    root = tmp_path_factory.mktemp("origin")
    os.chmod(root, 0o755)
    os.makedirs(root / "data")
    for i in range(FILES):
        with open(root / "data" / f"f{i:02}.bin", "wb") as f:
            f.write(os.urandom(FILE_SIZE))
    with open(root / "data" / "huge.bin", "wb") as f:
        f.write(os.urandom(3 * FILE_SIZE))
    server = Nginx(str(root))
    yield root, server
    server.stop()


def make_tmpfs(path, size):
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                   check=True)
    return path


@pytest.fixture
def tmpfs(tmp_path):
    yield make_tmpfs(tmp_path / "tmpfs", "64m")
    subprocess.run(["umount", "-l", str(tmp_path / "tmpfs")])


@pytest.fixture
def small_tmpfs(tmp_path):
    yield make_tmpfs(tmp_path / "small", "20m")
    subprocess.run(["umount", "-l", str(tmp_path / "small")])


def cached_bytes(cache_dir):
    """Bytes of file data in the cache tree (allocated blocks)."""
    total = 0
    for parent, _, names in os.walk(os.path.join(cache_dir, "tree")):
        for name in names:
            total += os.lstat(os.path.join(parent, name)).st_blocks * 512
    return total


class Sampler(threading.Thread):
    """Samples the cache's size every 20 ms while the reads run."""

    def __init__(self, cache_dir):
        super().__init__(daemon=True)
        self.cache_dir, self.peak, self.done = cache_dir, 0, threading.Event()

    def run(self):
        while not self.done.is_set():
            try:
                self.peak = max(self.peak, cached_bytes(self.cache_dir))
            except FileNotFoundError:  # a file went while walking: sample again
                pass
            time.sleep(0.02)


@pytest.mark.parametrize("mode", ["fuse", "fanotify"])
def test_tree_four_times_the_limit(mode, origin, tmpfs, mount_factory, fan_factory):
    root, server = origin
    args = ["--cache-max-size", f"{LIMIT // MiB}M"]
    if mode == "fuse":
        m = mount_factory(server.url, cache=str(tmpfs / "cache"), args=args)
    else:
        m = fan_factory(server.url, args=args)
    walk_to(m.mountpoint, "data/x")
    server.clear_log()
    sampler = Sampler(m.cache_dir)
    sampler.start()
    try:
        for _ in range(2):
            for i in range(FILES):
                name = f"data/f{i:02}.bin"
                assert sha256(m.path(name)) == sha256(os.path.join(root, name)), name
            # The kernel's page cache would serve the second round by itself.
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3")
    finally:
        sampler.done.set()
        sampler.join()
    assert 0 < sampler.peak <= BOUND, f"cache held {sampler.peak} bytes, limit {LIMIT}"
    # A cyclic read is LRU's worst case: the second round found every file
    # but those still within the limit evicted, and fetched them again.
    server.settle()
    data_bytes = sum(r.bytes for r in server.requests() if r.uri.startswith("/data/f"))
    assert data_bytes >= 2 * FILES * FILE_SIZE - LIMIT - FILE_SIZE


def test_full_file_system_evicts_then_says_enospc(origin, small_tmpfs, mount_factory):
    """20 MiB of tmpfs and no --cache-max-size: the third 8 MiB file finds
    the file system full, the first file is evicted, and the read goes on;
    a 24 MiB file cannot fit at all and fails with ENOSPC."""
    root, server = origin
    m = mount_factory(server.url, cache=str(small_tmpfs / "cache"))
    walk_to(m.mountpoint, "data/x")
    for i in range(4):
        name = f"data/f{i:02}.bin"
        assert sha256(m.path(name)) == sha256(os.path.join(root, name)), name
    assert "the cache file system is full" in m.log()
    with pytest.raises(OSError) as failed:
        with open(m.path("data", "huge.bin"), "rb") as f:
            while f.read(MiB):
                pass
    assert failed.value.errno == errno.ENOSPC
    # What was read is still right, and the daemon still serves.
    assert sha256(m.path("data/f03.bin")) == sha256(os.path.join(root, "data/f03.bin"))


def httphsm(*args):
    return subprocess.run([httphsm_binary(), *args], capture_output=True, text=True, timeout=120)


def test_pinned_file_survives_the_limit(origin, tmpfs, mount_factory):
    root, server = origin
    m = mount_factory(server.url, cache=str(tmpfs / "cache"),
                      args=["--cache-max-size", f"{LIMIT // MiB}M"])
    walk_to(m.mountpoint, "data/x")
    pinned = m.path("data", "f00.bin")
    assert httphsm("prefetch", "--pin", pinned).returncode == 0
    for i in range(1, FILES):
        name = f"data/f{i:02}.bin"
        assert sha256(m.path(name)) == sha256(os.path.join(root, name)), name
    status = httphsm("status", "--bytes", pinned).stdout.split()
    assert status[:4] == ["full", str(FILE_SIZE), "/", str(FILE_SIZE)], status
    assert "(pinned)" in status
    refused = httphsm("evict", pinned)
    assert refused.returncode == 1 and "is pinned" in refused.stderr
    assert httphsm("unpin", pinned).stdout.startswith("unpinned")
    assert httphsm("evict", pinned).returncode == 0
    assert httphsm("status", pinned).stdout.startswith("online")
    usage = cache_line(httphsm("status", "--bytes", m.mountpoint).stdout)
    assert usage[0] == "cache" and int(usage[1]) <= LIMIT + MiB and usage[3] == str(LIMIT)


@pytest.mark.parametrize("mode", ["fuse", "fanotify"])
def test_unused_files_age_out(mode, origin, tmpfs, mount_factory, fan_factory):
    """--cache-max-age 2s: a file read once is evicted a few seconds later;
    one read again meanwhile is not."""
    root, server = origin
    args = ["--cache-max-age", "2s"]
    if mode == "fuse":
        m = mount_factory(server.url, cache=str(tmpfs / "cache"), args=args)
    else:
        m = fan_factory(server.url, args=args)
    walk_to(m.mountpoint, "data/x")
    old, kept = m.path("data", "f00.bin"), m.path("data", "f01.bin")
    assert httphsm("prefetch", old).returncode == 0
    assert httphsm("prefetch", kept).returncode == 0
    deadline = time.time() + 20
    while httphsm("status", old).stdout.startswith("full") and time.time() < deadline:
        # prefetch goes through the daemon, so it is a use in both modes
        # (fanotify mode does not see reads of complete files).
        assert httphsm("prefetch", kept).returncode == 0
        time.sleep(0.5)
    assert httphsm("status", old).stdout.startswith("online")
    assert httphsm("status", kept).stdout.startswith("full")
    assert sha256(old) == sha256(os.path.join(root, "data/f00.bin"))


def test_limit_and_pins_survive_a_remount(origin, tmpfs, mount_factory):
    """A new daemon counts what the cache holds (a scan, no record needed)
    and keeps pins: reading on after a remount stays within the limit."""
    root, server = origin
    cache = str(tmpfs / "cache")
    args = ["--cache-max-size", f"{LIMIT // MiB}M"]
    m = mount_factory(server.url, cache=cache, args=args)
    walk_to(m.mountpoint, "data/x")
    pinned = m.path("data", "f00.bin")
    assert httphsm("prefetch", "--pin", pinned).returncode == 0
    for i in range(1, 5):
        assert httphsm("prefetch", m.path("data", f"f{i:02}.bin")).returncode == 0
    held = cached_bytes(cache)
    m.umount()

    m = mount_factory(server.url, name="again", cache=cache, args=args)
    deadline = time.time() + 20
    while time.time() < deadline:
        usage = cache_line(httphsm("status", "--bytes", m.mountpoint).stdout)
        if int(usage[1]) >= held:
            break
        time.sleep(0.2)
    assert int(usage[1]) == held
    walk_to(m.mountpoint, "data/x")
    for i in range(5, FILES):
        name = f"data/f{i:02}.bin"
        assert sha256(m.path(name)) == sha256(os.path.join(root, name)), name
        assert cached_bytes(cache) <= BOUND
    status = httphsm("status", m.path("data", "f00.bin")).stdout
    assert status.startswith("full") and "(pinned)" in status
