"""HTTP errors, hostile listings and bad command lines, with real nginx."""
import errno
import os
import subprocess
import time

import pytest

from support.mount import httphsm_binary
from support.nginx import Nginx

pytestmark = pytest.mark.timeout(300)

HOSTILE_INDEX = """<html><body><pre>
<a href="../">../</a>
<a href="%2e%2e/">dotdot-encoded</a>
<a href="a%2Fb">slash</a>
<a href="nul%00">nul</a>
<a href="..%2F..%2Fescape">traversal</a>
<a href="/elsewhere/x">other dir</a>
<a href="http://other.example/file">other host</a>
<a href="?C=N;O=D">sort</a>
<a href="good.txt">good.txt</a>      02-Dec-2026 10:20      5
</pre></body></html>
"""


@pytest.fixture(scope="module")
def error_site(tmp_path_factory):
    root = tmp_path_factory.mktemp("site")
    os.chmod(root, 0o755)
    (root / "files").mkdir()
    for name in ("ok.txt", "gone.bin", "fail.bin", "forbidden.bin"):
        (root / "files" / name).write_bytes(name.encode() * 100)
    (root / "hostile").mkdir()
    (root / "hostile" / "index.html").write_text(HOSTILE_INDEX)
    (root / "hostile" / "good.txt").write_bytes(b"good\n")
    (root / "plain.txt").write_bytes(b"not a directory\n")
    extra = """
        location = /files/gone.bin { return 404; }
        location = /files/fail.bin { return 500; }
        location = /files/forbidden.bin { return 403; }
    """
    server = Nginx(str(root), extra=extra)
    yield server
    server.stop()


def read_error(path):
    with pytest.raises(OSError) as e:
        with open(path, "rb") as f:
            f.read()
    return e.value.errno


def test_http_errors_reach_the_reader(error_site, mount_factory):
    m = mount_factory(error_site.url, args=["--retries", "2"])
    assert open(m.path("files", "ok.txt"), "rb").read() == b"ok.txt" * 100
    assert read_error(m.path("files", "gone.bin")) == errno.ENOENT
    assert read_error(m.path("files", "forbidden.bin")) == errno.EACCES
    error_site.clear_log()
    assert read_error(m.path("files", "fail.bin")) == errno.EIO
    error_site.settle()  # nginx logs the last try after the reader has its error
    fails = [r for r in error_site.requests() if r.uri == "/files/fail.bin"]
    assert len(fails) == 3  # the first try and two retries
    # A failed range is not cached as present: a later read tries again.
    time.sleep(2.5)
    error_site.clear_log()
    assert read_error(m.path("files", "fail.bin")) == errno.EIO
    error_site.settle()
    assert len([r for r in error_site.requests() if r.uri == "/files/fail.bin"]) == 3


def test_hostile_listing_is_contained(error_site, mount_factory, tmp_path):
    m = mount_factory(error_site.url)
    assert sorted(os.listdir(m.path("hostile"))) == ["good.txt"]
    assert open(m.path("hostile", "good.txt"), "rb").read() == b"good\n"
    assert "unsafe name" in m.log()
    # Nothing was created outside the cache tree.
    tree = os.path.join(m.cache_dir, "tree")
    assert sorted(os.listdir(os.path.join(tree, "hostile"))) == ["good.txt"]
    assert sorted(os.listdir(m.cache_dir)) == ["control.sock", "httphsm.conf", "httphsm.log",
                                                "lock", "staging", "state", "tree"]
    assert os.listdir(os.path.join(m.cache_dir, "staging")) == []
    assert not os.path.exists(tmp_path / "escape")


def run_mount(*args):
    return subprocess.run([httphsm_binary(), "mount", *args], capture_output=True, text=True,
                          timeout=120)


def test_unreachable_url_fails_the_mount(tmp_path):
    (tmp_path / "mnt").mkdir()
    r = run_mount("--retries", "1", "--cache-dir", str(tmp_path / "c"),
                  "http://127.0.0.1:9/pub/", str(tmp_path / "mnt"))
    assert r.returncode == 1
    assert "cannot list http://127.0.0.1:9/pub/" in r.stderr
    assert "onnect" in r.stderr  # libcurl's "Failed to connect ... refused"


def test_not_a_listing_fails_the_mount(error_site, tmp_path):
    (tmp_path / "mnt").mkdir()
    r = run_mount("--cache-dir", str(tmp_path / "c"), error_site.url + "plain.txt",
                  str(tmp_path / "mnt"))
    assert r.returncode == 1
    assert "not a directory listing" in r.stderr or "HTTP 404" in r.stderr


def test_missing_mountpoint_fails(error_site, tmp_path):
    r = run_mount("--cache-dir", str(tmp_path / "c"), error_site.url, str(tmp_path / "nope"))
    assert r.returncode == 1
    assert "No such file or directory" in r.stderr


def test_bad_arguments_are_usage_errors(tmp_path):
    r = run_mount("only-one-argument")
    assert r.returncode == 2 and "expected URL and MOUNTPOINT" in r.stderr
    r = run_mount("ftp://example.org/", str(tmp_path))
    assert r.returncode == 1 and "only http:// and https://" in r.stderr
    r = run_mount("--mode", "nfs", "http://127.0.0.1/", str(tmp_path))
    assert r.returncode == 2 and "unknown --mode" in r.stderr
    r = run_mount("--min-window", "lots", "http://127.0.0.1/", str(tmp_path))
    assert r.returncode == 1 and "not a size" in r.stderr


def test_help_describes_every_option():
    r = subprocess.run([httphsm_binary(), "mount", "--help"], capture_output=True, text=True)
    assert r.returncode == 0
    for option in ("--mode", "--cache-dir", "--foreground", "--user", "--netrc", "--proxy",
                   "--insecure", "--max-connections", "--retries", "--min-window"):
        assert option in r.stdout
    r = subprocess.run([httphsm_binary(), "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "mount" in r.stdout and "umount" in r.stdout


def test_second_daemon_on_one_cache_is_refused(error_site, mount_factory, tmp_path):
    m = mount_factory(error_site.url)
    (tmp_path / "other").mkdir()
    r = run_mount("--cache-dir", m.cache_dir, error_site.url, str(tmp_path / "other"))
    assert r.returncode == 1
    assert f"in use by another httphsm daemon (pid {m.pid})" in r.stderr
