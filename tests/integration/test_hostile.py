"""Hostile or broken servers, in both modes: a listing that is not UTF-8,
a listing cut inside a tag, an entry no cache can hold, bodies that run past the range or the file,
trickles, and a prefetch the daemon is killed after.  Each one gets correct
bytes, a clear error on that entry, or a retry: never a crash, a hang, or
junk served as file data."""
import os
import subprocess
import threading
import time

import pytest

from support.faulty import FaultyServer
from support.files import pattern
from support.mount import httphsm_binary

pytestmark = pytest.mark.timeout(240)

SIZE = 1024 * 1024


def content(seed):
    return pattern(seed, SIZE)


@pytest.fixture
def site(tmp_path):
    root = tmp_path / "site"
    (root / "sub").mkdir(parents=True)
    (root / "data.bin").write_bytes(content("data"))
    (root / "other.bin").write_bytes(content("other"))
    (root / "sub" / "x").write_bytes(b"x\n")
    server = FaultyServer(str(root))
    yield server, root
    server.stop()


@pytest.fixture(params=["fuse", "fanotify"])
def make_mount(request, mount_factory, fan_factory):
    """make_mount(url, *args): a mount in the mode of the test's parameter."""
    def make(url, *args, **kwargs):
        if request.param == "fuse":
            return mount_factory(url, args=["-v", *args], **kwargs)
        return fan_factory(url, args=args, **kwargs)
    return make


def read_all(path):
    with open(path, "rb") as f:
        return f.read()


def cache_size(m, name):
    return os.path.getsize(os.path.join(m.cache_dir, "tree", name))


# A link followed by bytes that are not UTF-8, then a date: these 35 bytes
# once crashed the daemon in the listing parser's date regex.
BAD_UTF8_ROW = b"<a href=x>x</a>\xf4\xf4\xf4\xf4 02-Dec-2026 10:20 2\n"


@pytest.mark.parametrize("where", ["", "sub"])
def test_listing_that_is_not_utf8(site, make_mount, where):
    server, _ = site
    server.faults.pages[where] = BAD_UTF8_ROW
    m = make_mount(server.url)
    assert os.listdir(m.path(where)) == ["x"]
    assert m.daemon_alive()
    if where:
        assert read_all(m.path("sub", "x")) == b"x\n"
        assert sorted(os.listdir(m.path())) == ["data.bin", "other.bin", "sub"]


def test_listing_cut_inside_an_end_tag(site, make_mount):
    """Listings are parsed as they arrive, in the pieces the network cut;
    libxml2 2.9 takes all that follows a </style> cut in two as style text
    (an empty directory), so pieces end before an unfinished tag."""
    server, _ = site
    style = "<style>" + "p { color: #212121 }\n" * 150 + "</style>"  # past 2 KiB
    page = ("<html><head>" + style + "</head><body><pre>"
            '<a href="data.bin">data.bin</a> 02-Dec-2026 10:20 1048576\n'
            "</pre></body></html>").encode()
    server.faults.pages[""] = page
    server.faults.page_cut_at = page.index(b"</style>") + 4  # "</st" + "yle>"
    m = make_mount(server.url)
    assert os.listdir(m.path()) == ["data.bin"]
    assert read_all(m.path("data.bin")) == content("data")


def test_entry_too_big_for_the_cache_costs_only_that_entry(site, make_mount):
    server, _ = site
    server.faults.pages[""] = (
        b'<pre><a href="huge.iso">huge.iso</a>  02-Dec-2026 10:20  20000000000000\n'
        b'<a href="data.bin">data.bin</a>  02-Dec-2026 10:20  1048576\n</pre>')
    m = make_mount(server.url)
    assert os.listdir(m.path()) == ["data.bin"]
    assert read_all(m.path("data.bin")) == content("data")
    assert "huge.iso: listed size 20000000000000 is more than the cache can hold" in m.log()


def wait_for_log(m, text, timeout=20):
    deadline = time.time() + timeout
    while text not in m.log() and time.time() < deadline:
        time.sleep(0.1)
    return text in m.log()


def check_cut(m, name="data.bin"):
    assert read_all(m.path(name)) == content("data")
    # The surplus may arrive after the reader was served.
    assert wait_for_log(m, "they were cut")
    assert os.path.getsize(m.path(name)) == SIZE
    assert cache_size(m, name) == SIZE
    assert read_all(m.path(name)) == content("data")
    assert m.daemon_alive()


@pytest.mark.parametrize("faults", [
    {"overrun": 300_000},                         # "bytes 0-1348575/1048576", 300 kB of junk
    {"ignore_range": True, "surplus": 300_000},   # chunked: the file, then 300 kB more
], ids=["range-past-eof", "whole-body-surplus"])
def test_bytes_past_the_range_or_the_file_are_cut(site, make_mount, faults):
    server, _ = site
    m = make_mount(server.url)
    os.listdir(m.path())
    for name, value in faults.items():
        setattr(server.faults, name, value)
    check_cut(m)


def test_endless_body_stops_at_the_end_of_the_file(site, make_mount):
    server, _ = site
    m = make_mount(server.url)
    os.listdir(m.path())
    server.faults.ignore_range = True
    server.faults.surplus = -1  # chunked, never ends
    check_cut(m)
    deadline = time.time() + 30
    while not server.requests("data.bin") and time.time() < deadline:
        time.sleep(0.1)
    # The daemon hung up soon after the end of the file (the server's
    # socket buffers hold a few MB more).
    assert sum(r[4] for r in server.requests("data.bin")) < SIZE + 32 * SIZE


def test_trickles_block_neither_other_files_nor_their_readers(site, make_mount):
    server, root = site
    for i in range(8):
        (root / f"t{i}.slow").write_bytes(b"t" * 50_000)
    # 4 bytes/s: more than libcurl's old 1 B/s floor, far less than --min-rate.
    server.faults.trickle_path = ".slow"
    # --timeout 60: only cancellation, not --min-rate, can end them below.
    m = make_mount(server.url, "--max-connections", "8", "--timeout", "60")
    os.listdir(m.path())
    readers = [subprocess.Popen(["dd", f"if={m.path(f't{i}.slow')}", "of=/dev/null",
                                 "bs=4096", "count=1"], stderr=subprocess.DEVNULL)
               for i in range(8)]
    time.sleep(1)
    assert all(r.poll() is None for r in readers)  # all 8 connections trickle

    # A healthy file is read while the 8 trickles hold every connection.
    result = {}
    thread = threading.Thread(target=lambda: result.setdefault("data",
                                                               read_all(m.path("other.bin"))),
                              daemon=True)
    thread.start()
    thread.join(60)
    assert not thread.is_alive()
    assert result["data"] == content("other")

    # Readers who give up go away at once, whatever the server does.
    for r in readers:
        r.kill()
    for r in readers:
        r.wait(30)
    # ...and nobody waits for the trickles now: they are hung up on.
    cancelled = "nobody waits for it any more"
    deadline = time.time() + 25
    while m.log().count(cancelled) < 8 and time.time() < deadline:
        time.sleep(0.5)
    assert m.log().count(cancelled) == 8
    assert all(r[4] < 200 for r in server.requests(".slow"))
    assert "warning" not in m.log()  # cancelling is not an error
    assert m.daemon_alive()


def test_prefetch_is_durable_once_it_says_done(site, make_mount, tmp_path):
    server, _ = site
    m = make_mount(server.url, "--restarts", "0", name="first")  # no guardian restart
    os.listdir(m.path())
    subprocess.run([httphsm_binary(), "prefetch", m.path("data.bin")], check=True,
                   capture_output=True, timeout=120)
    m.kill()  # at once: before the once-a-second state flush
    server.reset()
    m2 = make_mount(server.url, name="second", cache=m.cache_dir)
    assert read_all(m2.path("data.bin")) == content("data")
    assert server.requests("data.bin") == []  # nothing fetched again
