"""Many clients, one origin: the HTTP cache tier between them (docs/fleet.md).

A caching nginx (proxy_cache + slice) and Squid on 127.0.0.1 in front of an
origin nginx whose access log tells what the origin sent.  Asserted: the
bytes every client reads, what the origin sends for 8 clients at once, and
that a file changed at the origin is read all-old or all-new, never spliced."""
import collections
import concurrent.futures
import errno
import hashlib
import os
import subprocess
import time

import pytest

from support.files import MiB
from support.httpcache import CachingNginx, Squid
from support.mount import walk_to
from support.nginx import Nginx
from support.tree import BIG_TAR

pytestmark = pytest.mark.timeout(600)

CLIENTS = 8
BIG = 64 * MiB
CHANGING = 24 * MiB
GRID = 256 * 1024  # the default --min-window
TAR_HEAD = "tar tvf {} | head -20"


def version_bytes(version, size):
    """size bytes that differ from every other version's in every 4 KiB."""
    block = hashlib.sha256(f"version {version}".encode()).digest() * 128
    return block * (size // len(block))


def write_version(path, version, size, mtime):
    """Replaces path (rename, as a mirror does) with version's bytes."""
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(version_bytes(version, size))
    os.utime(tmp, (mtime, mtime))
    os.rename(tmp, path)


@pytest.fixture(scope="module")
def origin_root(tmp_path_factory, tree_root):
    root = tmp_path_factory.mktemp("origin")
    pub = root / "pub"
    pub.mkdir()
    write_version(str(pub / "big.bin"), 1, BIG, 1_700_000_000)
    for proxy in ("nginx", "squid"):
        write_version(str(pub / f"changing-{proxy}.bin"), 1, CHANGING, 1_700_000_000)
    os.symlink(os.path.join(tree_root, "pub", BIG_TAR), pub / "linux.tar")
    os.chmod(root, 0o755)
    return root


@pytest.fixture(scope="module")
def origin(origin_root):
    server = Nginx(str(origin_root))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def cache(origin):
    server = CachingNginx(origin.url)
    yield server
    server.stop()


def read_all(path):
    with open(path, "rb") as f:
        return f.read()


def origin_ranges(origin, name):
    """How often the origin sent each range of name (None: no Range)."""
    return collections.Counter(r.range if r.range not in ("", "-") else None
                               for r in origin.requests()
                               if r.uri.endswith(name) and r.method == "GET")


def test_eight_clients_cost_the_origin_each_slice_once(origin, cache, mount_factory, fan_factory,
                                                      tree_root):
    want_head = subprocess.run(TAR_HEAD.format(os.path.join(tree_root, "pub", BIG_TAR)),
                               shell=True, capture_output=True, timeout=120).stdout
    want_big = hashlib.sha256(version_bytes(1, BIG)).hexdigest()
    mounts = [fanotify_client(fan_factory, mount_factory, cache.url + "pub/")]
    mounts += [mount_factory(cache.url + "pub/", name=f"c{i}") for i in range(1, CLIENTS)]
    for m in mounts:
        walk_to(m.mountpoint, "linux.tar")
    origin.clear_log()
    cache.clear_log()

    def client(m):
        head = subprocess.run(TAR_HEAD.format(m.path("linux.tar")), shell=True,
                              capture_output=True, timeout=300).stdout
        return head, hashlib.sha256(read_all(m.path("big.bin"))).hexdigest()

    with concurrent.futures.ThreadPoolExecutor(CLIENTS) as pool:
        results = list(pool.map(client, mounts))
    origin.settle(quiet=1.0)
    for head, digest in results:
        assert head == want_head and len(head.splitlines()) == 20
        assert digest == want_big
    for name in ("big.bin", "linux.tar"):
        ranges = origin_ranges(origin, name)
        assert ranges and all(r and r.startswith("bytes=") for r in ranges), ranges
        assert max(ranges.values()) == 1, f"{name}: slices fetched twice: {ranges}"
    big_bytes = origin.bytes_sent("big.bin")
    assert BIG <= big_bytes <= 1.25 * BIG, big_bytes
    # Clients asked for blocks of the same grid, which any cache can share.
    sizes = {"big.bin": BIG, "linux.tar": os.path.getsize(os.path.join(tree_root, "pub", BIG_TAR))}
    for r in cache.requests():
        name = os.path.basename(r.uri)
        if name in sizes and r.method == "GET":
            first, last = (int(n) for n in r.range.removeprefix("bytes=").split("-"))
            assert first % GRID == 0 and ((last + 1) % GRID == 0 or last + 1 == sizes[name]), r


def fanotify_client(fan_factory, mount_factory, url):
    """One client in fanotify mode where this kernel has pre-content events,
    else FUSE like the others."""
    try:
        return fan_factory(url, name="c0")
    except pytest.skip.Exception:
        return mount_factory(url, name="c0")


def read_or_error(path):
    """The file's bytes, or the errno its reading failed with."""
    try:
        return read_all(path)
    except OSError as e:
        return e.errno


def assert_one_version(got, size):
    """All-old, all-new, or an error: never a mix."""
    if isinstance(got, int):
        assert got == errno.EIO, os.strerror(got)
        return None
    for version in (1, 2):
        if got == version_bytes(version, size):
            return version
    mixed = sorted({got[i:i + 4096] == version_bytes(2, 4096) for i in range(0, size, 4096)})
    pytest.fail(f"read {len(got)} bytes that are neither version (new 4 KiB blocks: {mixed})")


@pytest.mark.parametrize("proxy", ["nginx", "squid"])
def test_a_change_at_the_origin_is_never_spliced(origin, origin_root, cache, mount_factory, proxy):
    size = CHANGING
    name = f"changing-{proxy}.bin"
    path = str(origin_root / "pub" / name)
    squid = Squid() if proxy == "squid" else None
    try:
        if squid:
            url, args = origin.url + "pub/", ["--proxy", squid.url]
        else:
            url, args = cache.url + "pub/", []
        early = mount_factory(url, name=f"early-{proxy}", args=args)
        with open(early.path(name), "rb") as f:
            assert f.read(8 * MiB) == version_bytes(1, 8 * MiB)
            # The cache now holds the first slices (Squid: the whole file).
            write_version(path, 2, size, 1_700_000_100)
            rest = read_or_error_from(f)
        assert rest == errno.EIO or rest == version_bytes(1, size)[8 * MiB:], \
            "the reader that began on the old version got new bytes"
        late = mount_factory(url, name=f"late-{proxy}", args=args)
        seen = [assert_one_version(read_or_error(late.path(name)), size) for _ in range(3)]
        seen += [assert_one_version(read_or_error(early.path(name)), size) for _ in range(2)]
        if proxy == "nginx":
            # nginx hangs up on a request that would mix the old slices it
            # holds with new ones; the retry asks it to revalidate
            # (no-cache), after which everyone reads the new version.
            assert seen[2] == 2 and seen[4] == 2, seen
        else:
            # Squid holds the whole old file, fresh by its heuristic (20%
            # of its age): it serves that, consistently, until it expires.
            assert set(seen) <= {1, 2, None} and seen[2] == seen[4] and seen[4] is not None, seen
    finally:
        if squid:
            squid.stop()


def read_or_error_from(f):
    try:
        return f.read()
    except OSError as e:
        return e.errno


def test_squid_fetches_each_file_from_the_origin_once(origin, mount_factory):
    squid = Squid()
    try:
        want = version_bytes(1, BIG)
        origin.clear_log()
        first = mount_factory(origin.url + "pub/", name="sq0", args=["--proxy", squid.url])
        with open(first.path("big.bin"), "rb") as f:
            f.seek(40 * MiB)
            assert f.read(MiB) == want[40 * MiB:41 * MiB]
        for i in range(1, 4):
            m = mount_factory(origin.url + "pub/", name=f"sq{i}", args=["--proxy", squid.url])
            assert read_all(m.path("big.bin")) == want
        origin.settle(quiet=1.0)
        assert origin_ranges(origin, "big.bin") == {None: 1}
        assert origin.bytes_sent("big.bin") == BIG
        assert any(line[0] == "GET" and line[-1].endswith("HIT") for line in squid.log_lines())
    finally:
        squid.stop()


def test_proxy_from_the_environment(origin, tmp_path):
    squid = Squid()
    try:
        env = dict(os.environ, http_proxy=squid.url)
        mnt, cache_dir = tmp_path / "env", tmp_path / "env-cache"
        mnt.mkdir()
        from support.mount import httphsm_binary
        subprocess.run([httphsm_binary(), "mount", "--cache-dir", str(cache_dir),
                        origin.url + "pub/", str(mnt)], env=env, check=True, timeout=60)
        try:
            assert "big.bin" in os.listdir(mnt)
        finally:
            subprocess.run(["fusermount3", "-u", str(mnt)], timeout=30)
        assert any(origin.url + "pub/" in " ".join(line) for line in squid.log_lines())
    finally:
        squid.stop()


def test_proxy_authentication(origin, mount_factory):
    squid = Squid(credentials=("hsm", "s3cret"))
    try:
        with pytest.raises(RuntimeError, match="407"):
            mount_factory(origin.url + "pub/", name="noauth", args=["--proxy", squid.url])
        m = mount_factory(origin.url + "pub/", name="auth",
                          args=["--proxy", squid.url, "--proxy-user", "hsm:s3cret"])
        with open(m.path("big.bin"), "rb") as f:
            assert f.read(MiB) == version_bytes(1, MiB)
    finally:
        squid.stop()


def test_https_origin_through_connect(ca_tls, tree_root, mount_factory):
    ca, cert, key = ca_tls
    server = Nginx(tree_root, tls=(cert, key))
    squid = Squid()
    try:
        m = mount_factory(server.url + "pub/", name="tls",
                          args=["--proxy", squid.url, "--cacert", ca])
        walk_to(m.mountpoint, BIG_TAR)
        with open(m.path(BIG_TAR), "rb") as f, \
                open(os.path.join(tree_root, "pub", BIG_TAR), "rb") as want:
            assert f.read(MiB) == want.read(MiB)
        assert all(r.protocol == "HTTP/2.0" for r in server.requests())
        m.umount()  # Squid logs a tunnel once it is closed
        deadline = time.time() + 10
        while not any(line[0] == "CONNECT" for line in squid.log_lines()):
            assert time.time() < deadline, squid.log_lines()
            time.sleep(0.1)
    finally:
        squid.stop()
        server.stop()


@pytest.fixture(scope="module")
def ca_tls(tmp_path_factory):
    from support.tls import make_ca
    return make_ca(tmp_path_factory.mktemp("ca"))
