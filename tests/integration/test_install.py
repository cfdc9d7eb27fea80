"""The Debian package on this host: dpkg -i of build-deb/httphsm_*.deb (made by
scripts/build-deb when there is none), the files it installs, and each of them
working in place (the mount helper's name, man pages, bash completion, the
systemd unit); dpkg -r at the end.  Root only."""
import glob
import os
import re
import subprocess

import pytest

from support.tree import DEEP

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.skipif(os.geteuid() != 0, reason="dpkg -i needs root"),
]

FILES = [
    "/usr/bin/httphsm",
    "/sbin/mount.httphsm",
    "/usr/share/man/man1/httphsm.1.gz",
    "/usr/share/man/man8/mount.httphsm.8.gz",
    "/usr/share/bash-completion/completions/httphsm",
    "/lib/systemd/system/httphsm@.service",
]


def run(*args, check=True, **kwargs):
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True,
                            timeout=300, **kwargs)
    if check and result.returncode != 0:
        raise AssertionError(f"{args} exited {result.returncode}:\n"
                             f"{result.stdout}{result.stderr}")
    return result


def installed_version():
    result = run("dpkg-query", "-W", "-f=${Status} ${Version}", "httphsm", check=False)
    if result.returncode == 0 and result.stdout.startswith("install ok installed"):
        return result.stdout.split()[-1]
    return None


@pytest.fixture(scope="module")
def package():
    """The package, installed for the module's tests; removed afterwards unless it
    was installed before."""
    debs = sorted(glob.glob(os.path.join(REPO, "build-deb", "httphsm_*.deb")),
                  key=os.path.getmtime)
    if not debs:
        run(os.path.join(REPO, "scripts", "build-deb"))
        debs = glob.glob(os.path.join(REPO, "build-deb", "httphsm_*.deb"))
    deb = debs[-1]
    before = installed_version()
    run("dpkg", "-i", deb)
    yield deb
    if before is None:
        run("dpkg", "-r", "httphsm")
        for path in FILES:
            assert not os.path.lexists(path), f"{path} left after dpkg -r"


def test_installed_files(package):
    listed = set(run("dpkg", "-L", "httphsm").stdout.split("\n"))
    for path in FILES:
        assert path in listed, f"{path} not in dpkg -L httphsm"
        assert os.path.lexists(path), path
    # Nothing else but directories and the package's own documentation.
    extra = {p for p in listed - set(FILES)
             if p and not os.path.isdir(p) and not p.startswith("/usr/share/doc/httphsm/")}
    assert not extra, f"unexpected files: {sorted(extra)}"


def test_mount_helper_is_the_program(package):
    assert os.readlink("/sbin/mount.httphsm") == "/usr/bin/httphsm"
    version = run("/usr/bin/httphsm", "--version").stdout.split()[-1]
    assert f"httphsm_{version}_" in os.path.basename(package)
    # Called by that name it is mount(8)'s helper, with its own usage.
    result = run("/sbin/mount.httphsm", check=False)
    assert result.returncode == 2
    assert "mount.httphsm URL MOUNTPOINT" in result.stderr


def test_man_pages(package):
    for page in ("httphsm", "mount.httphsm"):
        path = run("man", "-w", page).stdout.strip()
        assert path.startswith("/usr/share/man/"), path
        result = run("man", "--warnings", page, env={**os.environ, "MANWIDTH": "80"})
        assert not result.stderr, result.stderr
        assert "EXAMPLES" in result.stdout


def complete(line):
    """What bash completion offers at the end of line."""
    script = r"""
source /usr/share/bash-completion/bash_completion
source /usr/share/bash-completion/completions/httphsm
COMP_LINE=$1
COMP_POINT=${#COMP_LINE}
read -ra COMP_WORDS <<<"$COMP_LINE"
[[ $COMP_LINE == *" " ]] && COMP_WORDS+=("")
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
_httphsm httphsm "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}"
"""
    if not os.path.exists("/usr/share/bash-completion/bash_completion"):
        pytest.skip("bash-completion is not installed")
    out = run("bash", "-c", script, "complete", line).stdout
    return [w for w in out.split("\n") if w]


def test_completion_verbs_and_options(package):
    assert complete("httphsm mo") == ["mount"]
    assert set(complete("httphsm ")) >= {"mount", "umount", "status", "prefetch", "evict",
                                         "unpin", "refresh"}
    assert "--pin" in complete("httphsm prefetch --")
    assert "cache-dir=" in complete("httphsm mount -o ro,cache-d")[0]


def test_completion_knows_every_mount_option(package):
    """The completion's long options of mount are those mount --help lists."""
    help_text = run("/usr/bin/httphsm", "mount", "--help").stdout
    documented = set(re.findall(r"^\s+(?:-\w, )?(--[a-z][a-z-]*)", help_text, re.M))
    assert len(documented) > 20, help_text
    assert documented - set(complete("httphsm mount --")) == set()


def test_systemd_unit(package):
    result = run("systemd-analyze", "verify", "/lib/systemd/system/httphsm@.service",
                 check=False, cwd="/")
    assert result.returncode == 0 and not result.stderr.strip(), result.stderr
    unit = open("/lib/systemd/system/httphsm@.service").read()
    assert "Type=notify" in unit
    assert "ExecStart=/usr/bin/httphsm mount -f $OPTIONS $URL %f" in unit


# --- Mounts through mount(8) --------------------------------------------------------
# With the package installed, mount(8) finds /usr/bin/httphsm (mount.fuse3 runs it for
# type fuse.httphsm) and /sbin/mount.httphsm (type httphsm, fanotify mode).


def listing(path):
    return sorted(os.listdir(path))


def assert_reads(mnt, tree_root):
    """A file three directories down reads as the origin's."""
    for part in DEEP.split("/")[:-1]:
        mnt = os.path.join(mnt, part)
        os.listdir(mnt)  # mainline fanotify mode finds only listed directories
    with open(os.path.join(mnt, os.path.basename(DEEP)), "rb") as got, \
            open(os.path.join(tree_root, "pub", DEEP), "rb") as want:
        assert got.read() == want.read()


def unmount(path):
    run("umount", path, check=False)
    if os.path.ismount(path):
        run("umount", "-l", path, check=False)


def test_mount_t_fuse_httphsm(package, nginx, tree_root, tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    try:
        run("mount", "-t", "fuse.httphsm", nginx.url + "pub/", mnt, "-o",
            f"ro,allow_other,cache-dir={tmp_path}/cache,max-connections=16")
        assert listing(mnt) == listing(os.path.join(tree_root, "pub"))
        assert_reads(mnt, tree_root)
        with open("/proc/self/mounts") as f:
            assert any(line.split()[1] == str(mnt) and line.split()[2] == "fuse.httphsm"
                       for line in f)
    finally:
        unmount(mnt)


def test_fstab_line(package, nginx, tree_root, tmp_path):
    mnt, fstab = tmp_path / "fsmnt", tmp_path / "fstab"
    mnt.mkdir()
    fstab.write_text(f"# a test fstab\n{nginx.url}pub/ {mnt} fuse.httphsm "
                     f"ro,_netdev,nofail,cache-dir={tmp_path}/cache,dir-cache-time=10m 0 0\n")
    try:
        run("mount", "-a", "-T", fstab)
        assert listing(mnt) == listing(os.path.join(tree_root, "pub"))
        assert_reads(mnt, tree_root)
    finally:
        unmount(mnt)


def test_mount_t_httphsm_is_fanotify_mode(package, nginx, tree_root, tmp_path, ext4):
    mnt = tmp_path / "fanmnt"
    mnt.mkdir()
    cache = ext4 / f"install-{os.getpid()}"
    result = run("mount", "-t", "httphsm", nginx.url + "pub/", mnt, "-o",
                 f"cache-dir={cache}", check=False)
    try:
        if "no fanotify pre-content events" in result.stderr:
            pytest.skip(f"kernel {os.uname().release}: {result.stderr.strip()}")
        assert result.returncode == 0, result.stderr
        status = run("/usr/bin/httphsm", "status", mnt).stdout
        assert status.split()[:2] == ["source", nginx.url + "pub/"], status
        assert listing(mnt) == listing(os.path.join(tree_root, "pub"))
        assert_reads(mnt, tree_root)
    finally:
        run("/usr/bin/httphsm", "umount", mnt, check=False)
        unmount(mnt)
