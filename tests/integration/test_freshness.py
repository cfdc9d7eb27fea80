"""Listings stay fresh: a tree that changes on a real nginx shows its new,
removed and changed files once --dir-cache-time has passed, in both modes,
with exact content; an unchanged listing served with validators costs a
304; an outage keeps the old listing.

Each test serves a small tree of its own (the shared test tree never
changes) and mounts it with a TTL of 2 s."""
import os
import subprocess
import time

import pytest

from support.mount import httphsm_binary, walk_to
from support.nginx import Nginx

pytestmark = pytest.mark.timeout(120)

TTL = 2.0
MODES = ["fuse", "fanotify"]


def write(path, data, mtime=None):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    if mtime is not None:
        os.utime(path, (mtime, mtime))


@pytest.fixture
def origin(tmp_path):
    """(root, nginx): root/d/ holds a.txt and b.txt, autoindex listings."""
    root = tmp_path / "origin"
    write(str(root / "d" / "a.txt"), b"old a\n" * 1000, mtime=1700000000)
    write(str(root / "d" / "b.txt"), b"b\n" * 10, mtime=1700000000)
    os.chmod(tmp_path, 0o755)
    server = Nginx(str(root))
    yield root, server
    server.stop()


def mount(mode, url, mount_factory, fan_factory, *args):
    args = ["--dir-cache-time", f"{TTL:g}s", *args]  # a later one wins
    if mode == "fanotify":
        return fan_factory(url, args=args)
    return mount_factory(url, args=args)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def listing_gets(server, uri):
    return [r for r in server.requests() if r.method == "GET" and r.uri == uri]


@pytest.mark.parametrize("mode", MODES)
def test_added_removed_changed_after_ttl(mode, origin, mount_factory, fan_factory):
    root, server = origin
    m = mount(mode, server.url, mount_factory, fan_factory)
    walk_to(m.mountpoint, "d/x")
    assert sorted(os.listdir(m.path("d"))) == ["a.txt", "b.txt"]
    assert read(m.path("d", "a.txt")) == b"old a\n" * 1000

    write(str(root / "d" / "a.txt"), b"new a, longer\n" * 2000, mtime=1700000100)
    os.unlink(root / "d" / "b.txt")
    write(str(root / "d" / "c.txt"), b"c is new\n" * 3, mtime=1700000200)
    time.sleep(TTL + 0.5)

    assert sorted(os.listdir(m.path("d"))) == ["a.txt", "c.txt"]
    assert os.stat(m.path("d", "a.txt")).st_size == len(b"new a, longer\n") * 2000
    assert os.stat(m.path("d", "a.txt")).st_mtime == 1700000100
    assert read(m.path("d", "a.txt")) == b"new a, longer\n" * 2000
    assert read(m.path("d", "c.txt")) == b"c is new\n" * 3
    assert not os.path.exists(m.path("d", "b.txt"))
    assert "b.txt: no longer on the server" in m.log()


@pytest.mark.parametrize("mode", MODES)
def test_unchanged_listing_is_not_refetched_within_ttl(mode, origin, mount_factory,
                                                       fan_factory):
    """Within the TTL nothing is asked again; after it, one GET of the
    listing (nginx's autoindex sends no validators: the same bytes come
    back, compared with the old page, and nothing is invalidated)."""
    root, server = origin
    m = mount(mode, server.url, mount_factory, fan_factory)
    walk_to(m.mountpoint, "d/x")
    assert read(m.path("d", "a.txt")) == b"old a\n" * 1000
    server.settle()
    server.clear_log()
    for _ in range(3):
        assert sorted(os.listdir(m.path("d"))) == ["a.txt", "b.txt"]
    assert listing_gets(server, "/d/") == []
    time.sleep(TTL + 0.5)
    assert sorted(os.listdir(m.path("d"))) == ["a.txt", "b.txt"]
    assert read(m.path("d", "a.txt")) == b"old a\n" * 1000
    server.settle()
    assert len(listing_gets(server, "/d/")) == 1
    # a.txt kept its bytes: no GET of it after the revalidation.
    assert [r for r in server.requests() if r.uri == "/d/a.txt"] == []


@pytest.fixture
def static_origin(tmp_path):
    """A mirror whose listings are generated index.html files (nginx serves
    them as static files, with ETag and Last-Modified): revalidation gets a
    304."""
    root = tmp_path / "static"
    write(str(root / "d" / "a.txt"), b"a\n" * 100, mtime=1700000000)
    write(str(root / "index.html"),
          b'<html><body><pre><a href="d/">d/</a>  14-Nov-2023 22:13  -\n</pre></body></html>')
    write(str(root / "d" / "index.html"),
          b'<html><body><pre><a href="../">../</a>\n'
          b'<a href="a.txt">a.txt</a>  14-Nov-2023 22:13  200\n</pre></body></html>')
    os.chmod(tmp_path, 0o755)
    server = Nginx(str(root), extra="location / { autoindex off; index index.html; }")
    yield root, server
    server.stop()


@pytest.mark.parametrize("mode", MODES)
def test_unchanged_listing_with_validators_costs_a_304(mode, static_origin, mount_factory,
                                                       fan_factory):
    root, server = static_origin
    m = mount(mode, server.url, mount_factory, fan_factory)
    walk_to(m.mountpoint, "d/x")
    assert os.listdir(m.path("d")) == ["a.txt"]
    server.settle()
    server.clear_log()
    time.sleep(TTL + 0.5)
    assert os.listdir(m.path("d")) == ["a.txt"]
    server.settle()
    gets = listing_gets(server, "/d/")
    assert [(r.status, r.bytes) for r in gets] == [(304, 0)]
    assert read(m.path("d", "a.txt")) == b"a\n" * 100


@pytest.mark.parametrize("mode", MODES)
def test_outage_keeps_the_listing(mode, origin, mount_factory, fan_factory):
    """The server goes away: the cached listings and the bytes already
    fetched stay, and the log says why."""
    root, server = origin
    m = mount(mode, server.url, mount_factory, fan_factory, "--retries", "1")
    walk_to(m.mountpoint, "d/x")
    assert read(m.path("d", "a.txt")) == b"old a\n" * 1000
    server.stop()
    time.sleep(TTL + 0.5)
    assert sorted(os.listdir(m.path("d"))) == ["a.txt", "b.txt"]
    assert read(m.path("d", "a.txt")) == b"old a\n" * 1000
    assert "cannot revalidate the listing of d/" in m.log()


def test_fuse_open_file_survives_its_removal(origin, mount_factory):
    """FUSE: a reader that holds a file open keeps reading it after a
    revalidated listing removed it."""
    root, server = origin
    m = mount("fuse", server.url, mount_factory, None)
    with open(m.path("d", "a.txt"), "rb") as held:
        assert held.read() == b"old a\n" * 1000
        os.unlink(root / "d" / "a.txt")
        time.sleep(TTL + 0.5)
        assert os.listdir(m.path("d")) == ["b.txt"]
        held.seek(0)
        assert held.read() == b"old a\n" * 1000


def httphsm(*args):
    return subprocess.run([httphsm_binary(), *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("mode", MODES)
def test_refresh_and_status(mode, origin, mount_factory, fan_factory):
    """With --dir-cache-time inf a listing is never revalidated on its own;
    `refresh` does it now, `refresh -r` for the listed subtree, and `status`
    shows each listing's age."""
    root, server = origin
    m = mount(mode, server.url, mount_factory, fan_factory, "--dir-cache-time", "inf")
    walk_to(m.mountpoint, "d/x")
    status = httphsm("status", m.path("d"))
    assert status.returncode == 0 and status.stdout.startswith("listed "), status
    assert httphsm("status", "--bytes", m.path("d")).stdout.split()[:3] == ["listed", "0", "s"]

    write(str(root / "d" / "c.txt"), b"c\n", mtime=1700000300)
    time.sleep(TTL + 0.5)  # inf, not the TTL of the other tests
    assert sorted(os.listdir(m.path("d"))) == ["a.txt", "b.txt"]
    done = httphsm("refresh", m.path("d"))
    assert done.returncode == 0 and done.stdout.startswith("refreshed 1 listing "), done
    assert sorted(os.listdir(m.path("d"))) == ["a.txt", "b.txt", "c.txt"]
    assert read(m.path("d", "c.txt")) == b"c\n"

    write(str(root / "top.txt"), b"top\n")
    os.unlink(root / "d" / "c.txt")
    done = httphsm("refresh", "-r", m.mountpoint)
    assert done.returncode == 0 and done.stdout.startswith("refreshed 2 listings "), done
    assert sorted(os.listdir(m.mountpoint)) == ["d", "top.txt"]
    assert sorted(os.listdir(m.path("d"))) == ["a.txt", "b.txt"]
    failed = httphsm("refresh", m.path("d", "a.txt"))
    assert failed.returncode == 1 and "not a directory" in failed.stderr
