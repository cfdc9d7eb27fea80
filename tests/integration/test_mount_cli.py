"""The mount command as mount(8), fstab and first-time users meet it: -o
NAME=VALUE for every option, the forms mount.fuse3 and mount.httphsm run,
and the rough edges (a mount point already in use, a failed mount's cache
directory, fanotify mode without root, options anywhere)."""
import os
import subprocess

import pytest

from support.mount import httphsm_binary, is_mounted, walk_to
from support.tree import DEEP

pytestmark = pytest.mark.timeout(120)

def run(*args, env=None):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=60,
                          env=env)


def fuse_options(mountpoint):
    with open("/proc/self/mounts") as f:
        for line in f:
            fields = line.split()
            if fields[1] == str(mountpoint):
                return fields[2], fields[3].split(",")
    return None, []


@pytest.fixture
def unmount_all():
    mounted = []
    yield mounted
    for m in mounted:
        if is_mounted(str(m)):
            run(httphsm_binary(), "umount", m)
        if is_mounted(str(m)):
            run("umount", "-l", m)


def read_listing(mnt):
    return sorted(os.listdir(mnt))


def test_every_option_has_an_o_form(nginx, tmp_path, unmount_all, tree_root):
    mnt, cache = tmp_path / "mnt", tmp_path / "cache"
    mnt.mkdir()
    r = run(httphsm_binary(), "mount", "-o",
            f"cache-dir={cache},max-connections=4,dir-cache-time=1m,min-window=128K,"
            "allow_other,ro,_netdev,nofail,noauto,x-systemd.automount,defaults",
            nginx.url + "pub/", mnt)
    unmount_all.append(mnt)
    assert r.returncode == 0, r.stderr
    assert (cache / "lock").exists()
    fstype, options = fuse_options(mnt)
    assert fstype == "fuse.httphsm" and "allow_other" in options and "ro" in options
    assert read_listing(mnt) == sorted(os.listdir(os.path.join(tree_root, "pub")))


@pytest.mark.parametrize("option, message", [
    ("bogus", "unknown mount option 'bogus'"),
    ("max-connections=many", "-o max-connections=many: not a number"),
    ("cache-dir", "-o cache-dir needs a value"),
    ("insecure=yes", "-o insecure takes no value"),
])
def test_bad_o_options_are_refused_before_anything(nginx, tmp_path, option, message):
    mnt, cache = tmp_path / "mnt", tmp_path / "cache"
    mnt.mkdir()
    r = run(httphsm_binary(), "mount", "--cache-dir", cache, "-o", option,
            nginx.url + "pub/", mnt)
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert not cache.exists() and not is_mounted(str(mnt))


def test_comma_in_a_value(nginx, tmp_path, unmount_all):
    mnt, cache = tmp_path / "mnt", tmp_path / "cache"
    mnt.mkdir()
    log = tmp_path / "a,b.log"
    r = run(httphsm_binary(), "mount", "-o", f"cache-dir={cache},log-file={tmp_path}/a\\,b.log",
            nginx.url + "pub/", mnt)
    unmount_all.append(mnt)
    assert r.returncode == 0, r.stderr
    assert log.exists()


@pytest.fixture
def httphsm_in_path():
    """mount(8) gives its helpers a fixed PATH: httphsm must be in it, as
    the package installs it.  A symlink in /usr/local/bin for the test."""
    link = "/usr/local/bin/httphsm"
    if os.path.lexists(link):
        yield
        return
    os.symlink(httphsm_binary(), link)
    yield
    os.unlink(link)


def test_mount_t_fuse_httphsm_and_fstab(nginx, tmp_path, unmount_all, tree_root, httphsm_in_path):
    """mount(8) runs mount.fuse3, which runs `httphsm URL MOUNTPOINT -o ...`."""
    env = None
    want = sorted(os.listdir(os.path.join(tree_root, "pub")))

    mnt, cache = tmp_path / "mnt", tmp_path / "cache"
    mnt.mkdir()
    r = run("mount", "-t", "fuse.httphsm", nginx.url + "pub/", mnt, "-o",
            f"ro,allow_other,cache-dir={cache},max-connections=16", env=env)
    unmount_all.append(mnt)
    assert r.returncode == 0, r.stderr
    assert read_listing(mnt) == want
    assert run(httphsm_binary(), "umount", mnt).returncode == 0

    fstab = tmp_path / "fstab"
    fsmnt, fscache = tmp_path / "fsmnt", tmp_path / "fscache"
    fsmnt.mkdir()
    fstab.write_text(f"{nginx.url}pub/ {fsmnt} fuse.httphsm "
                     f"ro,_netdev,nofail,cache-dir={fscache},dir-cache-time=10m 0 0\n")
    r = run("mount", "-a", "-T", fstab, env=env)
    unmount_all.append(fsmnt)
    assert r.returncode == 0, r.stderr
    assert read_listing(fsmnt) == want


def test_mount_httphsm_helper(nginx, tmp_path, unmount_all, tree_root):
    """mount(8) runs /sbin/mount.httphsm SOURCE DIR [-sfnv] [-o ...] for type
    httphsm (fanotify mode unless -o mode=fuse)."""
    helper = tmp_path / "mount.httphsm"
    os.symlink(httphsm_binary(), helper)
    mnt, cache = tmp_path / "mnt", tmp_path / "cache"
    mnt.mkdir()
    assert run(helper, nginx.url + "pub/", mnt, "-f", "-o", "mode=fuse").returncode == 0
    assert not is_mounted(str(mnt)), "-f (fake) must not mount"
    r = run(helper, nginx.url + "pub/", mnt, "-n", "-s", "-o",
            f"mode=fuse,cache-dir={cache},some-future-option")
    unmount_all.append(mnt)
    assert r.returncode == 0, r.stderr
    assert "ignoring unknown mount option 'some-future-option'" in r.stderr
    assert read_listing(mnt) == sorted(os.listdir(os.path.join(tree_root, "pub")))


def test_mounting_on_a_mount_point_is_refused(nginx, tmp_path, unmount_all, tree_root):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    first = run(httphsm_binary(), "mount", "--cache-dir", tmp_path / "c1", nginx.url + "pub/", mnt)
    unmount_all.append(mnt)
    assert first.returncode == 0, first.stderr
    second = run(httphsm_binary(), "mount", "--cache-dir", tmp_path / "c2",
                 nginx.url + "pub/", mnt)
    assert second.returncode == 1
    assert f"{mnt} is already a mount point (fuse.httphsm)" in second.stderr
    assert not (tmp_path / "c2").exists()
    with open("/proc/self/mounts") as f:
        assert sum(line.split()[1] == str(mnt) for line in f) == 1
    assert read_listing(mnt) == sorted(os.listdir(os.path.join(tree_root, "pub")))


def test_a_failed_mount_leaves_no_cache_directory(tmp_path):
    mnt, cache = tmp_path / "mnt", tmp_path / "cache"
    mnt.mkdir()
    r = run(httphsm_binary(), "mount", "--cache-dir", cache, "--retries", "0",
            "http://127.0.0.1:9/pub/", mnt)
    assert r.returncode == 1 and "cannot list http://127.0.0.1:9/pub/" in r.stderr, r.stderr
    assert not cache.exists() and not is_mounted(str(mnt))


def test_a_failed_mount_keeps_an_existing_cache(tmp_path):
    mnt, cache = tmp_path / "mnt", tmp_path / "cache"
    mnt.mkdir()
    cache.mkdir()
    (cache / "keep").write_text("mine")
    r = run(httphsm_binary(), "mount", "--cache-dir", cache, "--retries", "0",
            "http://127.0.0.1:9/pub/", mnt)
    assert r.returncode == 1
    assert (cache / "keep").read_text() == "mine"


def test_fanotify_mode_without_root_says_so_first(nginx, tmp_path):
    mnt, cache = tmp_path / "mnt", tmp_path / "cache"
    mnt.mkdir()
    os.chmod(tmp_path, 0o777)
    r = run("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", httphsm_binary(),
            "mount", "--mode", "fanotify", "--cache-dir", cache, nginx.url + "pub/", mnt)
    assert r.returncode == 1
    assert "fanotify mode needs root (CAP_SYS_ADMIN)" in r.stderr, r.stderr
    assert not cache.exists()


def test_version_is_in_help():
    out = run(httphsm_binary(), "--help").stdout
    assert "-V, --version" in out
    version = run(httphsm_binary(), "-V")
    assert version.returncode == 0 and version.stdout.startswith("httphsm ")


def test_verb_options_go_anywhere(mounted, tree_root):
    listed = sorted(os.listdir(mounted.mountpoint))
    path = mounted.path(listed[0])
    before = run(httphsm_binary(), "status", "--bytes", path)
    after = run(httphsm_binary(), "status", path, "--bytes")
    assert before.returncode == after.returncode == 0, after.stderr
    assert before.stdout == after.stdout
    bad = run(httphsm_binary(), "status", path, "--bites")
    assert bad.returncode == 2 and "unknown option '--bites'" in bad.stderr


def test_status_columns_line_up(mounted):
    walk_to(mounted.mountpoint, DEEP)
    with open(mounted.path(DEEP), "rb") as f:
        f.read(1)
    paths = [mounted.path(DEEP), mounted.path("a"), mounted.mountpoint]
    out = run(httphsm_binary(), "status", *paths).stdout.splitlines()
    lines = [line for line in out if not line.startswith(("cache", "source"))]
    assert [line.index(p) for line, p in zip(lines, paths)] == [lines[0].index(paths[0])] * 3, out
    cache_line = [line for line in out if line.startswith("cache")][0]
    assert cache_line.index("(file data") == lines[0].index(paths[0]), out


def test_errors_name_the_path_given(mounted):
    relative = os.path.relpath(mounted.path("no-such-file"))
    r = run(httphsm_binary(), "prefetch", relative)
    assert r.returncode == 1 and f"httphsm prefetch: {relative}" in r.stderr, r.stderr


def test_prefetch_r_takes_every_file_below(mounted, nginx, tree_root):
    walk_to(mounted.mountpoint, DEEP)
    want = {os.path.join(d, f): os.path.getsize(os.path.join(d, f))
            for d, _, fs in os.walk(os.path.join(tree_root, "pub", "odd")) for f in fs}
    nginx.clear_log()
    r = run(httphsm_binary(), "prefetch", "-r", mounted.path("odd"), mounted.path(DEEP))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"prefetched {len(want) + 1} of {len(want) + 1} files"), r.stdout
    for path in want:
        rel = os.path.relpath(path, os.path.join(tree_root, "pub"))
        status = run(httphsm_binary(), "status", "--bytes", mounted.path(rel)).stdout.split()
        assert status[0] == "full" and int(status[1]) == want[path], (rel, status)


def test_status_of_the_mount_names_its_source(mounted, nginx):
    out = run(httphsm_binary(), "status", mounted.mountpoint).stdout.splitlines()
    assert out[0].split() == ["source", nginx.url + "pub/", "(cache", mounted.cache_dir + ")"]
