"""HTTP features through real nginx: TLS verification, authentication,
redirects, HTTP/2."""
import os
import subprocess

import pytest

from support.nginx import Nginx

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("site")
    os.chmod(root, 0o755)
    (root / "dir").mkdir()
    (root / "dir" / "file.txt").write_bytes(b"secret data\n")
    return root


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    """A self-signed certificate for 127.0.0.1 and its key."""
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(d / "key.pem"), "-out", str(d / "cert.pem")],
                   check=True, capture_output=True)
    return d


def mount_cmd(binary, url, tmp_path, *args):
    (tmp_path / "mnt").mkdir(exist_ok=True)
    return subprocess.run([binary, "mount", "--retries", "0", "--cache-dir",
                           str(tmp_path / "cache"), *args, url, str(tmp_path / "mnt")],
                          capture_output=True, text=True, timeout=60)


def test_tls_is_verified(site, tls, binary, tmp_path, mount_factory):
    server = Nginx(str(site), tls=(tls / "cert.pem", tls / "key.pem"))
    try:
        r = mount_cmd(binary, server.url, tmp_path)
        assert r.returncode == 1
        assert "certificate" in r.stderr.lower()
        m = mount_factory(server.url, args=["--cacert", str(tls / "cert.pem")])
        assert open(m.path("dir", "file.txt"), "rb").read() == b"secret data\n"
        m.umount()
        m = mount_factory(server.url, name="insecure", args=["--insecure"])
        assert open(m.path("dir", "file.txt"), "rb").read() == b"secret data\n"
    finally:
        server.stop()


def test_basic_authentication(site, binary, tmp_path, mount_factory):
    hashed = subprocess.run(["openssl", "passwd", "-apr1", "s3cret"], capture_output=True,
                            text=True, check=True).stdout.strip()
    users = tmp_path / "htpasswd"
    users.write_text(f"alice:{hashed}\n")
    os.chmod(tmp_path, 0o755)
    server = Nginx(str(site), extra=f'auth_basic "httphsm"; auth_basic_user_file {users};')
    try:
        r = mount_cmd(binary, server.url, tmp_path)
        assert r.returncode == 1 and "HTTP 401" in r.stderr
        m = mount_factory(server.url, args=["--user", "alice:s3cret"])
        assert open(m.path("dir", "file.txt"), "rb").read() == b"secret data\n"
    finally:
        server.stop()


def test_redirects_are_followed(site, mount_factory):
    server = Nginx(str(site), extra="location = /moved/file.txt { return 302 /dir/file.txt; }")
    (site / "moved").mkdir(exist_ok=True)
    (site / "moved" / "file.txt").write_bytes(b"secret data\n")
    try:
        # /dir (no slash) answers 301 to /dir/; /moved/file.txt answers 302.
        m = mount_factory(server.url.rstrip("/") + "/dir")
        assert os.listdir(m.path()) == ["file.txt"]
        m2 = mount_factory(server.url, name="m2")
        assert open(m2.path("moved", "file.txt"), "rb").read() == b"secret data\n"
    finally:
        server.stop()
