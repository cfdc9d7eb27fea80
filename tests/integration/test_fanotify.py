"""fanotify mode against a real nginx: on this machine's kernel (mainline
6.14+ pre-content events) and, inside the QEMU guest, on the patched 6.1.

The cache lives on an ext4 image the test loop-mounts (fanotify pre-content
events need a file system that opts in; /tmp may be tmpfs), and the daemon
marks only the bind mount it creates."""
import errno
import os
import shutil
import signal
import subprocess
import threading
import time

import pytest

from support.files import MiB, sha256, snapshot, tar_head
from support.mount import httphsm_binary, is_mounted, walk_to
from support.tree import BIG_TAR, DEEP, V6, many_file_size

pytestmark = pytest.mark.timeout(300)




def lookup_events_supported(m):
    return "before lookups" in m.log()


def guardian_pids(mountpoint):
    return subprocess.run(["pgrep", "-f", f"__guardian.*{mountpoint}"],
                          capture_output=True, text=True).stdout.split()


def event_lines(m):
    return [line for line in m.log().splitlines() if "fanotify event" in line]


@pytest.mark.parametrize("name", [f"{V6}/linux-6.1.tar.xz", f"{V6}/ChangeLog-6.1.2",
                                  "many/file-00042.dat", "odd/with space.txt"])
def test_content_matches(nginx, fan_factory, tree_root, name):
    m = fan_factory(nginx.url + "pub/")
    walk_to(m.mountpoint, name)
    assert sha256(m.path(name)) == sha256(os.path.join(tree_root, "pub", name))


def test_entries_match(nginx, fan_factory, tree_root):
    m = fan_factory(nginx.url + "pub/")
    for directory in ("", V6, "many"):
        walk_to(m.mountpoint, directory + "/x")
        assert snapshot(m.path(directory)) == snapshot(os.path.join(tree_root, "pub", directory))


def test_tar_head_transfers_little(nginx, fan_factory, tree_root):
    m = fan_factory(nginx.url + "pub/")
    walk_to(m.mountpoint, BIG_TAR)
    nginx.clear_log()
    got = tar_head(m.path(BIG_TAR))
    want = tar_head(os.path.join(tree_root, "pub", BIG_TAR))
    assert got == want and len(got.splitlines()) == 20
    assert 0 < nginx.bytes_sent(BIG_TAR) <= 2 * MiB


def test_complete_file_raises_no_more_events(nginx, fan_factory, tree_root):
    name = f"{V6}/ChangeLog-6.1.5"
    m = fan_factory(nginx.url + "pub/")
    walk_to(m.mountpoint, name)
    assert sha256(m.path(name)) == sha256(os.path.join(tree_root, "pub", name))
    before = len(event_lines(m))
    nginx.clear_log()
    for _ in range(3):
        assert sha256(m.path(name)) == sha256(os.path.join(tree_root, "pub", name))
    assert len(event_lines(m)) == before  # the daemon is out of the path
    assert nginx.requests() == []


@pytest.fixture
def failing_site(tmp_path, fan_factory):
    """A mount of a site whose fail.bin (100,000 bytes) always gets a 500."""
    from support.nginx import Nginx
    root = tmp_path / "site"
    root.mkdir()
    os.chmod(tmp_path, 0o755)
    (root / "fail.bin").write_bytes(b"x" * 100_000)
    server = Nginx(str(root), extra="location = /fail.bin { return 500; }")
    try:
        m = fan_factory(server.url, args=["--retries", "1"])
        os.listdir(m.path())
        yield m
    finally:
        server.stop()


def test_failed_fetch_is_eio_not_zeros(failing_site):
    fd = os.open(failing_site.path("fail.bin"), os.O_RDONLY)
    try:
        with pytest.raises(OSError) as e:
            os.pread(fd, 4096, 0)
        assert e.value.errno in (errno.EIO, errno.EPERM)  # EPERM: no errno responses
    finally:
        os.close(fd)


def test_evict_then_read_refetches_exactly_that(nginx, fan_factory, tree_root):
    name = f"{V6}/linux-6.1.tar.xz"
    m = fan_factory(nginx.url + "pub/")
    walk_to(m.mountpoint, name)
    binary = httphsm_binary()
    subprocess.run([binary, "prefetch", m.path(name)], check=True, timeout=120)
    status = subprocess.run([binary, "status", "--bytes", m.path(name)], check=True,
                            capture_output=True, text=True).stdout.split()
    size = os.path.getsize(os.path.join(tree_root, "pub", name))
    assert status[:4] == ["full", str(size), "/", str(size)]
    out = subprocess.run([binary, "evict", "--bytes", m.path(name)], check=True,
                         capture_output=True, text=True).stdout
    assert out.split()[:2] == ["evicted", str(size)]
    # Only file system metadata (an extent block) may remain.
    assert os.stat(os.path.join(m.cache_dir, "tree", name)).st_blocks * 512 <= 64 * 1024
    nginx.clear_log()
    assert sha256(m.path(name)) == sha256(os.path.join(tree_root, "pub", name))
    assert nginx.bytes_sent(name) == size


def test_evict_refuses_an_open_file(nginx, fan_factory):
    name = f"{V6}/ChangeLog-6.1.1"
    m = fan_factory(nginx.url + "pub/")
    walk_to(m.mountpoint, name)
    with open(m.path(name), "rb") as f:
        f.read()
        r = subprocess.run([httphsm_binary(), "evict", m.path(name)], capture_output=True,
                           text=True)
    assert r.returncode == 1 and "open" in r.stderr


def test_deep_path_opens_directly(nginx, fan_factory):
    m = fan_factory(nginx.url + "pub/")
    if not lookup_events_supported(m):
        pytest.skip("no lookup events on this kernel (mainline): see httphsm mount --help")
    with open(m.path("a", "b", "c", "d", "e", "deep.txt"), "rb") as f:
        assert f.read() == b"five levels down\n"


def test_lookups_during_a_listing_fetch_it_once(nginx, fan_factory):
    """Patched kernel: an ls of a 5,000-entry directory and stat() of 8 of its
    names, all at once from a fresh mount: each lookup event waits for the
    listing being fetched instead of fetching it again, and names it."""
    m = fan_factory(nginx.url + "pub/", args=["--populate", "lazy"])
    if not lookup_events_supported(m):
        pytest.skip("no lookup events on this kernel (mainline): see httphsm mount --help")
    numbers = range(0, 5000, 625)
    sizes = {}
    nginx.clear_log()
    threads = [threading.Thread(target=lambda: sizes.setdefault("ls", len(os.listdir(
        m.path("many")))))]
    threads += [threading.Thread(target=lambda i=i: sizes.setdefault(i, os.stat(
        m.path("many", f"file-{i:05d}.dat")).st_size)) for i in numbers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sizes.pop("ls") == 5000
    assert sizes == {i: many_file_size(i) for i in numbers}
    nginx.settle()
    listings = [r for r in nginx.requests() if r.uri.rstrip("/").endswith("/many")]
    assert len(listings) == 1, listings
    assert any("(lookup of 'file-" in line for line in event_lines(m))


def test_fuse_and_fanotify_share_one_cache(nginx, fan_factory, mount_factory, ext4, tree_root):
    name = f"{V6}/linux-6.1.tar.xz"
    cache = str(ext4 / "shared-cache")
    fuse = mount_factory(nginx.url + "pub/", name="fuse", cache=cache)
    with open(fuse.path(name), "rb") as f:
        f.seek(50 * MiB)
        first_half = f.read(20 * MiB)
    fuse.umount()
    nginx.clear_log()
    fan = fan_factory(nginx.url + "pub/", name="fan", cache=cache)
    walk_to(fan.mountpoint, name)
    with open(fan.path(name), "rb") as f:
        f.seek(50 * MiB)
        assert f.read(20 * MiB) == first_half
    assert nginx.bytes_sent(name) == 0  # the FUSE mount fetched those bytes
    assert sha256(fan.path(name)) == sha256(os.path.join(tree_root, "pub", name))


def open_files(pid):
    """fd -> what it is, of process pid.  The daemon's threads open and close
    descriptors meanwhile (event files, connections): one closed between the
    listing and its readlink is left out."""
    files = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            files[fd] = os.readlink(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:
            pass
    return files


def test_the_guardian_outlives_the_daemon(nginx, fan_factory, tree_root):
    """It holds nothing of the daemon's but the fanotify groups, its table and
    its pipe; it is in a session of its own; the OOM killer spares it."""
    m = fan_factory(nginx.url + "pub/")
    walk_to(m.mountpoint, BIG_TAR)
    with open(m.path(BIG_TAR), "rb") as f:
        f.read(MiB)  # the daemon now has HTTP connections open
        daemon_sockets = open_files(m.pid).values()
        assert any(t.startswith("socket:") for t in daemon_sockets)
        [guardian] = guardian_pids(m.mountpoint)
        fds = open_files(guardian)
    held = sorted(t.split(":")[0] if ":" in t else "file" for fd, t in fds.items()
                  if int(fd) > 2)
    assert not any(t.startswith("socket:") for t in fds.values()), fds
    assert held.count("anon_inode") >= 1 and held.count("pipe") == 1, fds
    with open(f"/proc/{guardian}/oom_score_adj") as f:
        adj = f.read().strip()
    if has_capability(24):  # CAP_SYS_RESOURCE
        assert adj == "-1000"
    else:  # a container without it: the guardian says so
        assert "cannot set oom_score_adj" in m.log()
    assert os.getsid(int(guardian)) != os.getsid(m.pid)


def has_capability(bit):
    with open("/proc/self/status") as f:
        effective = next(line for line in f if line.startswith("CapEff:")).split()[1]
    return bool(int(effective, 16) >> bit & 1)


def test_kill_9_never_yields_zeros(nginx, fan_factory, tree_root):
    """Without restarts, readers of a daemon killed mid-read get correct bytes
    or an error; the guardian detaches the mount and exits once it is no
    longer used."""
    m = fan_factory(nginx.url + "pub/", args=["--max-window", "1M", "--restarts", "0"])
    walk_to(m.mountpoint, BIG_TAR)
    original = os.path.join(tree_root, "pub", BIG_TAR)
    outcome = {}

    def reader():
        block = 4 * MiB
        with open(original, "rb") as want, open(m.path(BIG_TAR), "rb") as got:
            offset = 0
            try:
                while True:
                    data = got.read(block)
                    if not data:
                        break
                    assert data == want.read(len(data)), f"wrong bytes at {offset}"
                    offset += len(data)
                outcome["result"] = "complete"
            except OSError as e:
                outcome["result"] = f"error {errno.errorcode[e.errno]} at {offset}"

    thread = threading.Thread(target=reader)
    nginx.clear_log()
    thread.start()
    deadline = time.time() + 120
    while nginx.bytes_sent(BIG_TAR) < 100 * MiB and thread.is_alive() and time.time() < deadline:
        time.sleep(0.02)
    assert thread.is_alive(), outcome  # the kill must land mid-read
    os.kill(m.pid, signal.SIGKILL)
    thread.join(120)
    assert not thread.is_alive()
    print("reader:", outcome["result"])
    assert outcome["result"] == "complete" or outcome["result"].startswith("error EIO") or \
        outcome["result"].startswith("error EPERM"), outcome
    deadline = time.time() + 10
    while is_mounted(m.mountpoint) and time.time() < deadline:
        time.sleep(0.1)
    assert not is_mounted(m.mountpoint)  # the guardian detached it
    deadline = time.time() + 10
    while (guardians := guardian_pids(m.mountpoint)) and time.time() < deadline:
        time.sleep(0.2)
    assert guardians == []  # and left once the last file was closed
    assert "the daemon died" in m.log()


def start_reader(path, outcome, key):
    """A started thread reading path whole: outcome[key] gets its bytes, or
    "error ENAME" if a call fails."""
    def read():
        try:
            with open(path, "rb") as f:
                outcome[key] = f.read()
        except OSError as e:
            outcome[key] = f"error {errno.errorcode[e.errno]}"

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


def blocked_readers(m, server, count, size):
    """count threads, each reading a whole file of size bytes that the
    server holds back: returns (threads, outcome, files' contents)."""
    outcome = {}
    names = [f"held-{i:02d}.slow" for i in range(count)]
    threads = [start_reader(m.path(name), outcome, name) for name in names]
    deadline = time.time() + 30
    while time.time() < deadline and \
            sum(".slow" in line for line in event_lines(m)) < count:
        time.sleep(0.05)
    assert sum(".slow" in line for line in event_lines(m)) >= count
    assert all(thread.is_alive() for thread in threads)
    return threads, outcome, names


def slow_site(tmp_path, count, size):
    from support.faulty import FaultyServer
    root = tmp_path / "site"
    root.mkdir()
    for i in range(count):
        (root / f"held-{i:02d}.slow").write_bytes(os.urandom(size))
    server = FaultyServer(str(root))
    return root, server


def wait_for_new_daemon(m, old_pid, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            pid = m.daemon_pid()
            if pid != old_pid and "took over" in m.log().split(f"[{old_pid}]")[-1]:
                return pid
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    raise AssertionError("no daemon took over:\n" + m.log()[-3000:])


def took_over_at(m):
    import datetime
    line = next(line for line in m.log().splitlines() if "took over" in line)
    stamp = datetime.datetime.strptime(line.split()[0], "%Y-%m-%dT%H:%M:%S.%fZ")
    return stamp.replace(tzinfo=datetime.timezone.utc).timestamp()


def test_restart_after_kill_9_serves_waiting_readers(tmp_path, fan_factory):
    """16 readers wait on ranges the server holds back; the daemon is killed:
    the guardian starts another, which finishes their events: every reader
    gets its file's bytes, none an error, and the mount stays."""
    count, size = 16, 300_000
    root, server = slow_site(tmp_path, count, size)
    try:
        m = fan_factory(server.url)
        os.listdir(m.path())
        [guardian] = guardian_pids(m.mountpoint)
        server.faults.stall_path = ".slow"
        threads, outcome, names = blocked_readers(m, server, count, size)
        old_pid = m.pid
        killed_at = time.time()
        os.kill(old_pid, signal.SIGKILL)
        m.pid = wait_for_new_daemon(m, old_pid)
        print(f"restart: the new daemon served {took_over_at(m) - killed_at:.3f} s after the kill")
        assert all(thread.is_alive() for thread in threads)  # still waiting
        server.release()
        for thread in threads:
            thread.join(60)
        for name in names:
            got = outcome.get(name)
            assert isinstance(got, bytes), f"{name}: {got}"
            assert got == (root / name).read_bytes(), name
        assert is_mounted(m.mountpoint)
        assert guardian_pids(m.mountpoint) == [guardian]  # the same guardian
        assert "restart 1 of 3" in m.log() and "16 events in flight" in m.log()
        # The new daemon serves new reads and answers to `httphsm umount`.
        server.faults.stall_path = None
        assert sorted(os.listdir(m.path())) == names
    finally:
        server.stop()


def test_restarts_are_bounded(tmp_path, fan_factory):
    """A daemon that keeps dying is restarted --restarts times; then the
    guardian unmounts and the readers waiting get EIO, never zeros."""
    count, size = 2, 100_000
    root, server = slow_site(tmp_path, count, size)
    try:
        m = fan_factory(server.url, args=["--restarts", "1"])
        os.listdir(m.path())
        server.faults.stall_path = ".slow"
        threads, outcome, names = blocked_readers(m, server, count, size)
        old_pid = m.pid
        os.kill(old_pid, signal.SIGKILL)
        m.pid = wait_for_new_daemon(m, old_pid)
        os.kill(m.pid, signal.SIGKILL)
        for thread in threads:
            thread.join(60)
        assert [outcome.get(name) for name in names] == ["error EIO"] * count
        deadline = time.time() + 10
        while is_mounted(m.mountpoint) and time.time() < deadline:
            time.sleep(0.1)
        assert not is_mounted(m.mountpoint)
        assert "the daemon died, too often" in m.log()
    finally:
        server.stop()


def test_an_event_read_but_not_recorded_fails_instead_of_hanging(tmp_path, fan_factory,
                                                                   monkeypatch):
    """The daemon dies between reading an event and recording it in the
    guardian's table (a test hook kills it there): the restarted daemon fails
    that access with EIO, since nobody knows its file, rather than leave its
    reader waiting forever or give its answer to a later event that got the
    same fd number; the next read gets the right bytes."""
    root, server = slow_site(tmp_path, 1, 300_000)
    flag = tmp_path / "die-unrecorded"
    monkeypatch.setenv("HTTPHSM_TEST_DIE_UNRECORDED", str(flag))
    try:
        m = fan_factory(server.url)
        [name] = os.listdir(m.path())
        old_pid = m.pid
        flag.touch()
        outcome = {}
        thread = start_reader(m.path(name), outcome, "result")
        thread.join(60)
        assert not thread.is_alive(), "the reader still waits:\n" + m.log()[-3000:]
        assert not flag.exists()  # the hook fired: the daemon died there
        assert outcome["result"] == "error EIO"
        m.pid = wait_for_new_daemon(m, old_pid)
        assert "did not record fail with EIO" in m.log()
        with open(m.path(name), "rb") as f:
            assert f.read() == (root / name).read_bytes()
    finally:
        server.stop()


def test_slow_fetch_does_not_block_other_reads(tmp_path, fan_factory):
    from support.faulty import FaultyServer
    root = tmp_path / "site"
    root.mkdir()
    (root / "slow.bin").write_bytes(b"s" * 100_000)
    (root / "fast.bin").write_bytes(b"f" * 100_000)
    server = FaultyServer(str(root))
    try:
        m = fan_factory(server.url)
        os.listdir(m.path())
        server.faults.stall_path = "slow.bin"
        slow = {}
        thread = threading.Thread(
            target=lambda: slow.setdefault("data", open(m.path("slow.bin"), "rb").read()))
        thread.start()
        time.sleep(0.5)
        assert thread.is_alive()  # held by the server
        start = time.monotonic()
        assert open(m.path("fast.bin"), "rb").read() == b"f" * 100_000
        assert time.monotonic() - start < 10
        assert thread.is_alive()
        server.release()
        thread.join(30)
        assert slow["data"] == b"s" * 100_000
    finally:
        server.stop()


def test_umount_refuses_a_busy_mount(nginx, fan_factory):
    name = f"{V6}/ChangeLog-6.1.3"
    m = fan_factory(nginx.url + "pub/")
    walk_to(m.mountpoint, name)
    with open(m.path(name), "rb") as f:
        r = subprocess.run([httphsm_binary(), "umount", m.mountpoint], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 1 and "busy" in r.stderr.lower()
        assert m.daemon_alive() and f.read()  # still served
    r = subprocess.run([httphsm_binary(), "umount", m.mountpoint], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert m.wait_daemon_exit(30)
    assert not is_mounted(m.mountpoint)
    assert "unmounted" in m.log()


@pytest.mark.parametrize("remove_mountpoint", [False, True])
def test_stop_waits_for_a_lazily_detached_mount(nginx, fan_factory, tree_root,
                                                remove_mountpoint):
    """`umount -l` with a file open, then SIGTERM: the daemon serves the open
    file until it is closed, then exits; the open file never reads zeros."""
    m = fan_factory(nginx.url + "pub/")
    walk_to(m.mountpoint, BIG_TAR)
    offset = 700 * MiB
    with open(os.path.join(tree_root, "pub", BIG_TAR), "rb") as f:
        f.seek(offset)
        expected = f.read(64 * 1024)
    fd = os.open(m.path(BIG_TAR), os.O_RDONLY)
    try:
        subprocess.run(["umount", "-l", m.mountpoint], check=True)
        if remove_mountpoint:
            os.rmdir(m.mountpoint)
        os.kill(m.pid, signal.SIGTERM)
        deadline = time.time() + 30
        while "still in use" not in m.log() and m.daemon_alive() and time.time() < deadline:
            time.sleep(0.05)
        assert "still in use" in m.log()
        assert os.pread(fd, len(expected), offset) == expected
        assert m.daemon_alive()
    finally:
        os.close(fd)
    assert m.wait_daemon_exit(30)
    assert "was unmounted" in m.log()


def crawl_status(m, timeout=120):
    """`httphsm status` of the mount once its crawl is done."""
    deadline = time.time() + timeout
    while True:
        out = subprocess.run([httphsm_binary(), "status", m.mountpoint], capture_output=True,
                             text=True).stdout
        if "crawl " not in out or "; going" not in out or time.time() > deadline:
            return out
        time.sleep(0.2)


def test_eager_populate_finds_deep_paths(nginx, fan_factory, tree_root):
    """--populate eager:DEPTH lists the tree in the background: once it is
    done, a deep path opens without anyone having listed its directories
    (on mainline, where there is no lookup event, nothing else would)."""
    m = fan_factory(nginx.url + "pub/", args=["--populate", "eager:6"])
    status = crawl_status(m)
    crawl = next(line for line in status.splitlines() if line.startswith("crawl"))
    assert crawl.endswith("; done"), status
    listed = int(crawl.split()[1])
    dirs = sum(1 for _, _, _ in os.walk(os.path.join(tree_root, "pub")))
    assert listed == dirs, (listed, dirs)
    with open(m.path(DEEP), "rb") as f, open(os.path.join(tree_root, "pub", DEEP), "rb") as want:
        assert f.read() == want.read()


def test_populate_default_follows_the_kernel(nginx, fan_factory):
    """Eager (3 levels) where the kernel has no lookup events, lazy where it has."""
    m = fan_factory(nginx.url + "pub/")
    status = crawl_status(m)
    if lookup_events_supported(m):
        assert "crawl" not in status, status
    else:
        assert "crawl " in status and "; done" in status, status


# ---- mappings ---------------------------------------------------------------
# Lazy mappings need page fault events (kernel-patches/ 0013, FAN_PRE_FAULT):
# then a mapping costs the pages it touches.  Elsewhere (mainline) mmap()
# fetches the whole mapped range first, as it does with --mmap=whole.

def lazy_mappings(m):
    return "mappings: lazy" in m.log()


@pytest.fixture
def lazy_tar(nginx, fan_factory):
    """A mount of pub/ whose mappings are lazy, the big tar's directories
    listed; skips on kernels without page fault events."""
    m = fan_factory(nginx.url + "pub/")
    walk_to(m.mountpoint, BIG_TAR)
    if not lazy_mappings(m):
        pytest.skip("no page fault events on this kernel (mainline maps whole ranges)")
    return m


def fault_events(m):
    """The daemon's log lines of FAN_PRE_FAULT events (mask 0x400000)."""
    return [line for line in event_lines(m) if "fanotify event 0x400000 " in line]


def mapped_bytes(path, offsets, length):
    """The bytes at offsets, read through a shared read-only mapping."""
    script = ("import mmap, os, sys\n"
              "fd = os.open(sys.argv[1], os.O_RDONLY)\n"
              "mm = mmap.mmap(fd, 0, prot=mmap.PROT_READ)\n"
              "n = int(sys.argv[2])\n"
              "sys.stdout.buffer.write(b''.join(mm[o:o + n] for o in map(int, sys.argv[3:])))\n")
    r = subprocess.run(["python3", "-c", script, path, str(length), *map(str, offsets)],
                       capture_output=True, timeout=120)
    return r.returncode, r.stdout


def local_bytes(path, offsets, length):
    with open(path, "rb") as f:
        return b"".join(os.pread(f.fileno(), length, o) for o in offsets)


def test_mmap_fetches_the_pages_it_touches(nginx, lazy_tar, tree_root):
    m = lazy_tar
    nginx.clear_log()
    offsets = [0, 100_000_000, 1_000_000_007]
    rc, got = mapped_bytes(m.path(BIG_TAR), offsets, 5)
    assert rc == 0
    assert got == local_bytes(os.path.join(tree_root, "pub", BIG_TAR), offsets, 5)
    nginx.settle()
    assert 0 < nginx.bytes_sent(BIG_TAR) <= 2 * MiB


def test_mmap_sequential_touch_streams(nginx, lazy_tar, tree_root):
    m = lazy_tar
    nginx.clear_log()
    span = 16 * MiB
    rc, got = mapped_bytes(m.path(BIG_TAR), range(0, span, 4096), 4096)
    assert rc == 0
    assert sha256_of(got) == sha256_of(local_bytes(os.path.join(tree_root, "pub", BIG_TAR),
                                                   [0], span))
    # About one event per fault-around window (64 KiB), never one per page
    # (4,096 here); a window can take two when fault-around skips a page
    # the daemon's read-ahead is writing at that moment (t_fault, with a
    # listener that fills synchronously, checks the exact count).
    assert 0 < len(fault_events(m)) <= 2 * span // (64 * 1024)
    nginx.settle()
    assert nginx.bytes_sent(BIG_TAR) <= span + 32 * MiB


def sha256_of(data):
    import hashlib
    return hashlib.sha256(data).hexdigest()


def test_ripgrep_through_mmap_fetches_what_it_scans(nginx, lazy_tar, tree_root):
    """rg --mmap stopping at its first match reads the start of a 1.3 GB
    tar: a lazy mapping fetches about that, not the file."""
    if not shutil.which("rg"):
        pytest.skip("ripgrep is not installed")
    m = lazy_tar
    nginx.clear_log()
    cmd = ["rg", "--mmap", "-a", "-m1", "-o", "linux-source-6.1/Documentation/Makefile"]
    got = subprocess.run([*cmd, m.path(BIG_TAR)], capture_output=True, timeout=120)
    want = subprocess.run([*cmd, os.path.join(tree_root, "pub", BIG_TAR)],
                          capture_output=True, timeout=120)
    assert got.returncode == 0 and got.stdout == want.stdout
    nginx.settle()
    assert 0 < nginx.bytes_sent(BIG_TAR) <= 64 * MiB


def test_mmap_whole_fetches_the_range_first(nginx, fan_factory, tree_root):
    name = f"{V6}/linux-6.1.tar.xz"
    m = fan_factory(nginx.url + "pub/", args=["--mmap", "whole"])
    walk_to(m.mountpoint, name)
    assert "mappings: whole" in m.log()
    nginx.clear_log()
    rc, got = mapped_bytes(m.path(name), [12345], 10)
    assert rc == 0
    assert got == local_bytes(os.path.join(tree_root, "pub", name), [12345], 10)
    nginx.settle()
    assert nginx.bytes_sent(name) == os.path.getsize(os.path.join(tree_root, "pub", name))


def test_mmap_of_a_failing_file_is_sigbus_not_zeros(failing_site):
    m = failing_site
    rc, got = mapped_bytes(m.path("fail.bin"), [8192], 16)
    # Lazy: the fault is denied (SIGBUS); whole: mmap() itself fails.
    assert rc == (-signal.SIGBUS if lazy_mappings(m) else 1)
    assert got == b""


def test_system_call_on_an_unfetched_mapping_is_efault(nginx, lazy_tar, tree_root, tmp_path):
    import mmap
    m = lazy_tar
    local = os.path.join(tree_root, "pub", BIG_TAR)
    offset = 500 * MiB
    with open(m.path(BIG_TAR), "rb") as f, open(tmp_path / "out", "wb") as out:
        mm = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
        view = memoryview(mm)[offset:offset + 4096]
        # The kernel touches the buffer inside write(): the daemon may not
        # write to the cache then, so bytes not fetched yet are refused.
        with pytest.raises(OSError) as e:
            os.write(out.fileno(), view)
        assert e.value.errno == errno.EFAULT
        assert mm[offset:offset + 1]  # a touch from user space fetches them
        assert os.write(out.fileno(), view) == 4096
        view.release()
        mm.close()
    assert (tmp_path / "out").read_bytes() == local_bytes(local, [offset], 4096)
