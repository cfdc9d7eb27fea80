"""Kernel tests of the fanotify pre-content series (kernel-patches/).

Runs the C programs of tests/kernel/ (built by `make -C tests/kernel`) on a
freshly made ext4, xfs and btrfs file system, each loop-mounted from an image
under $HSM_TEST_TMP (default /tmp, a tmpfs in the guest).  Meant to run as
root in the QEMU guest booted with the patched kernel (scripts/vm-tests); on
a mainline 6.14+ host kernel the same programs check the mainline subset of
the ABI and skip the httphsm-only events.

Every program bounds its own waits and is killed by a timeout here, so a
kernel deadlock fails a test instead of hanging the run.  The last test fails
if the kernel log has a lockdep report, a WARNING or a BUG.
"""

import os
import platform
import re
import shutil
import subprocess
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
BIN = os.environ.get("HTTPHSM_KTEST_BIN",
                     os.path.join(TOP, "build", "kernel-tests"))

TESTS = ["t_range", "t_fill", "t_noself", "t_deny", "t_refuse", "t_ignore",
         "t_readdir", "t_lookup", "t_exec", "t_freeze", "t_longname",
         "t_gating", "t_truncate", "t_lookuplast", "t_uring", "t_orphan",
         "t_fault"]
FILESYSTEMS = ["ext4", "xfs", "btrfs"]
PROGRAM_TIMEOUT = 900     # seconds; the programs time out earlier themselves

HSM_KERNEL = "httphsm" in platform.release()

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="needs root (mount, fanotify)")


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=120,
                          **kw)


@pytest.fixture(scope="module", params=FILESYSTEMS)
def fs(request):
    """A new file system of the given type, loop-mounted; yields its root."""
    fstype = request.param
    mkfs = {"ext4": ["mkfs.ext4", "-q", "-F"],
            "xfs": ["mkfs.xfs", "-q", "-f"],
            "btrfs": ["mkfs.btrfs", "-q", "-f"]}[fstype]
    if not shutil.which(mkfs[0]):
        pytest.skip(f"{mkfs[0]} not installed")
    work = tempfile.mkdtemp(prefix=f"hsm-{fstype}-",
                            dir=os.environ.get("HSM_TEST_TMP", "/tmp"))
    image = os.path.join(work, "fs.img")
    mnt = os.path.join(work, "mnt")
    os.mkdir(mnt)
    with open(image, "wb") as f:
        f.truncate(320 << 20)       # xfs refuses file systems below 300 MB
    run(mkfs + [image])
    run(["mount", "-o", "loop", image, mnt])
    try:
        yield fstype, mnt
    finally:
        # A failed freeze test must not leave the fs frozen
        subprocess.run(["fsfreeze", "-u", mnt], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        for _ in range(5):
            if subprocess.run(["umount", mnt]).returncode == 0:
                break
            subprocess.run(["sync"])
        else:
            subprocess.run(["umount", "-l", mnt])
        shutil.rmtree(work, ignore_errors=True)


@pytest.mark.parametrize("prog", TESTS)
def test_program(fs, prog):
    fstype, mnt = fs
    exe = os.path.join(BIN, prog)
    if not os.access(exe, os.X_OK):
        pytest.fail(f"{exe} missing: run `make -C tests/kernel` first")
    workdir = os.path.join(mnt, prog)
    os.makedirs(workdir, exist_ok=True)
    env = dict(os.environ, HSM_KERNEL="1" if HSM_KERNEL else "0")
    try:
        p = subprocess.run([exe, workdir], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, env=env,
                           timeout=PROGRAM_TIMEOUT)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else e.stdout
        pytest.fail(f"{prog} on {fstype} did not finish in "
                    f"{PROGRAM_TIMEOUT} s:\n{out or ''}")
    print(p.stdout)
    failed = [l for l in p.stdout.splitlines() if l.startswith("not ok")]
    assert p.returncode == 0 and not failed, (
        f"{prog} on {fstype}: exit status {p.returncode}\n" + p.stdout)


def watch_with_inotify(path):
    """An inotify watch on path (every event): the file system then has an
    fsnotify mark, which must not route its writes through the pre-content
    hooks.  Returns the inotify fd."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_CLOEXEC | os.O_NONBLOCK)
    if fd < 0 or libc.inotify_add_watch(fd, path.encode(), 0xfff) < 0:
        raise OSError(ctypes.get_errno(), "inotify")
    return fd


def test_loop_device_writes_under_inotify(fs):
    """A loop device backed by a file on a file system with an inotify watch
    takes writes (mkfs, a file, sync) without a kernel complaint: the loop
    driver writes its backing file under sb write access, where the
    pre-content hook must not run (lockdep asserts it)."""
    fstype, mnt = fs
    backing = os.path.join(mnt, "loop-backing.img")
    inner = os.path.join(mnt, "loop-mnt")
    os.makedirs(inner, exist_ok=True)
    with open(backing, "wb") as f:
        f.truncate(64 << 20)
    before = len(run(["dmesg"]).stdout.splitlines())
    watch = watch_with_inotify(mnt)
    dev = run(["losetup", "--find", "--show", backing]).stdout.strip()
    try:
        run(["mkfs.ext4", "-q", "-F", dev])
        run(["mount", dev, inner])
        try:
            data = os.urandom(8 << 20)
            with open(os.path.join(inner, "data"), "wb") as f:
                f.write(data)
            run(["sync"])
        finally:
            run(["umount", inner])
        run(["mount", "-o", "ro", dev, inner])
        try:
            with open(os.path.join(inner, "data"), "rb") as f:
                assert f.read() == data
        finally:
            run(["umount", inner])
    finally:
        subprocess.run(["losetup", "-d", dev])
        os.close(watch)
        os.unlink(backing)
    new = run(["dmesg"]).stdout.splitlines()[before:]
    bad = [l for l in new if SPLATS.search(l)]
    assert not bad, "kernel log:\n" + "\n".join(bad)


# Signs of a kernel problem in the log
SPLATS = re.compile(
    r"WARNING:|BUG:|Oops|general protection fault|Kernel panic|"
    r"possible circular locking|possible recursive locking|"
    r"inconsistent lock state|possible irq lock inversion|"
    r"lock held when returning to user space|bad unlock balance|"
    r"suspicious RCU usage|DEBUG_LOCKS_WARN_ON|"
    r"sleeping function called from invalid context|"
    r"blocked for more than \d+ seconds|hung_task")


@pytest.mark.skipif(not HSM_KERNEL,
                    reason="kernel log is only checked on the test kernel")
def test_kernel_log_clean():
    """No lockdep report, WARNING or BUG after the tests, lockdep still on."""
    log = run(["dmesg"]).stdout
    bad = [l for l in log.splitlines() if SPLATS.search(l)]
    assert not bad, "kernel log:\n" + "\n".join(bad)
    try:
        with open("/proc/lockdep_stats") as f:
            stats = f.read()
    except FileNotFoundError:
        pytest.skip("kernel without lockdep")
    m = re.search(r"debug_locks:\s+(\d+)", stats)
    assert m and m.group(1) == "1", "lockdep turned itself off:\n" + stats
