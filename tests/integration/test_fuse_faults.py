"""Servers that fail, drop connections, ignore Range, lie, stall, or change
a file under a reader: correct bytes or a clear error, never a hang or zeros."""
import errno
import os
import time

import pytest

from support.faulty import FaultyServer
from support.files import pattern

pytestmark = pytest.mark.timeout(180)

SIZE = 3 * 1024 * 1024 + 123


def content(seed):
    return pattern(seed, SIZE)


@pytest.fixture
def site(tmp_path):
    root = tmp_path / "site"
    root.mkdir()
    (root / "data.bin").write_bytes(content("data"))
    (root / "small.txt").write_bytes(b"small file\n")
    server = FaultyServer(str(root))
    yield server, root
    server.stop()


def mount(mount_factory, server, *args):
    return mount_factory(server.url, args=["--retries", "3", *args])


def read_all(path):
    with open(path, "rb") as f:
        return f.read()


def read_errno(path, offset=0, size=1 << 20):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.pread(fd, size, offset)
    except OSError as e:
        return e.errno
    finally:
        os.close(fd)
    return 0


def test_transient_5xx_are_retried(site, mount_factory):
    server, _ = site
    m = mount(mount_factory, server)
    server.reset()
    server.faults.fail_next = 2
    assert read_all(m.path("small.txt")) == b"small file\n"
    statuses = [r[3] for r in server.requests("small.txt")]
    assert statuses == [503, 503, 206]


def test_dropped_connections_resume_where_they_broke(site, mount_factory):
    server, _ = site
    m = mount(mount_factory, server, "--retries", "100")
    server.reset()
    server.faults.drop_after = 200_000
    assert read_all(m.path("data.bin")) == content("data")
    gets = server.requests("data.bin")
    # Each response brought 200 kB that were kept: no byte was fetched twice.
    assert sum(r[4] for r in gets) == SIZE
    assert len(gets) > SIZE // 200_000


def test_server_ignoring_range_still_gives_correct_bytes(site, mount_factory):
    server, _ = site
    m = mount(mount_factory, server)
    server.reset()
    server.faults.ignore_range = True
    fd = os.open(m.path("data.bin"), os.O_RDONLY)
    try:
        assert os.pread(fd, 4096, 2 * 1024 * 1024) == content("data")[2 << 20:(2 << 20) + 4096]
        assert os.pread(fd, 100, 5) == content("data")[5:105]
    finally:
        os.close(fd)
    assert read_all(m.path("data.bin")) == content("data")
    gets = server.requests("data.bin")
    assert [r[3] for r in gets] == [200]  # the whole file came once and was kept


def test_lying_content_length_is_not_trusted(site, mount_factory):
    server, _ = site
    m = mount(mount_factory, server, "--retries", "50")
    server.reset()
    server.faults.lie_length = True
    assert read_all(m.path("data.bin")) == content("data")


def test_wrong_content_range_is_an_error_not_data(site, mount_factory):
    server, _ = site
    m = mount(mount_factory, server)
    server.reset()
    server.faults.bad_range = True
    assert read_errno(m.path("data.bin"), 8192, 4096) == errno.EIO
    assert "bad Content-Range" in m.log()
    server.faults.bad_range = False
    time.sleep(2.2)  # failures are remembered for two seconds
    assert read_all(m.path("data.bin")) == content("data")


def test_stalled_transfer_times_out(site, mount_factory):
    server, _ = site
    m = mount(mount_factory, server, "--timeout", "2", "--retries", "1")
    server.reset()
    server.faults.stall = True
    start = time.monotonic()
    assert read_errno(m.path("small.txt")) == errno.EIO
    assert time.monotonic() - start < 30
    assert "too slow" in m.log()  # libcurl's words for a stall


def test_file_changed_under_a_reader(site, mount_factory):
    server, root = site
    m = mount(mount_factory, server, "--min-window", "64K")
    fd = os.open(m.path("data.bin"), os.O_RDONLY)
    try:
        assert os.pread(fd, 4096, 0) == content("data")[:4096]
        time.sleep(0.01)
        (root / "data.bin").write_bytes(content("new"))  # same size, new ETag
        with pytest.raises(OSError) as e:
            os.pread(fd, 4096, 2 * 1024 * 1024)
        assert e.value.errno == errno.EIO
    finally:
        os.close(fd)
    assert "changed on the server" in m.log()
    time.sleep(2.2)
    assert read_all(m.path("data.bin")) == content("new")  # old bytes were dropped


def test_file_that_grew_gets_its_new_size(site, mount_factory):
    server, root = site
    m = mount(mount_factory, server)
    assert os.path.getsize(m.path("small.txt")) == 11
    (root / "small.txt").write_bytes(b"a longer small file\n")
    assert read_errno(m.path("small.txt")) == errno.EIO
    time.sleep(2.5)
    assert os.path.getsize(m.path("small.txt")) == 20
    assert read_all(m.path("small.txt")) == b"a longer small file\n"


def test_change_detected_by_last_modified_without_etag(site, mount_factory):
    server, root = site
    server.faults.no_etag = True
    m = mount(mount_factory, server, "--min-window", "64K")
    fd = os.open(m.path("data.bin"), os.O_RDONLY)
    try:
        assert os.pread(fd, 4096, 0) == content("data")[:4096]
        (root / "data.bin").write_bytes(content("new"))  # same size
        later = time.time() + 120  # Last-Modified has one-second precision
        os.utime(root / "data.bin", (later, later))
        with pytest.raises(OSError) as e:
            os.pread(fd, 4096, 2 * 1024 * 1024)
        assert e.value.errno == errno.EIO
    finally:
        os.close(fd)
    assert "changed on the server" in m.log()
