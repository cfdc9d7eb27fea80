"""FUSE mode the way its users reach kernel.org: HTTPS with HTTP/2, verified
against a CA, through an emulated WAN link (W1: 50 ms RTT, 100 Mbit/s;
tests/support/wanlink.py).  A few representative walks, asserting what was
requested and the bytes read, never times (bench/ measures those)."""
import hashlib
import os
import subprocess

import pytest

from support.nginx import Nginx
from support.tls import make_ca
from support.tree import BIG_TAR, DEEP
from support.wanlink import WanLink

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def ca(tmp_path_factory):
    return make_ca(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="module", params=["exact", "rounded"])
def origin(request, tree_root, ca):
    """An HTTPS + HTTP/2 nginx listing exact or (kernel.org) rounded sizes,
    behind W1; yields (nginx, https URL of /pub/ through the link, exact)."""
    _, cert, key = ca
    server = Nginx(tree_root, exact_size=request.param == "exact", tls=(cert, key))
    link = WanLink("127.0.0.1", server.port, "W1")
    yield server, f"https://127.0.0.1:{link.port}/pub/", request.param == "exact"
    link.stop()
    server.stop()


@pytest.fixture
def wan_mount(origin, ca, mount_factory):
    server, url, _ = origin
    server.clear_log()
    return server, mount_factory(url, args=["--cacert", ca[0]])


def listings(server):
    return [r.uri for r in server.requests() if r.method == "GET" and r.uri.endswith("/")]


def test_everything_goes_over_http2(wan_mount):
    server, m = wan_mount
    assert os.listdir(m.path("linux"))
    assert {r.protocol for r in server.requests()} == {"HTTP/2.0"}


def test_tar_head_three_directories_down(wan_mount, tree_root):
    server, m = wan_mount
    tar = subprocess.Popen(["tar", "tvf", m.path(*BIG_TAR.split("/"))], stdout=subprocess.PIPE)
    head = [tar.stdout.readline() for _ in range(20)]
    tar.kill()
    tar.wait()
    local = subprocess.Popen(["tar", "tvf", os.path.join(tree_root, "pub", BIG_TAR)],
                             stdout=subprocess.PIPE)
    expected = [local.stdout.readline() for _ in range(20)]
    local.kill()
    local.wait()
    assert head == expected
    # One listing per directory on the way, each once.
    assert listings(server) == ["/pub/", "/pub/linux/", "/pub/linux/kernel/",
                                "/pub/linux/kernel/v6.x/"]
    tar_gets = [r for r in server.requests() if r.uri.endswith(BIG_TAR) and r.method == "GET"]
    assert tar_gets and all(r.status == 206 for r in tar_gets)
    assert sum(r.bytes for r in tar_gets) <= 2 << 20


def test_ls_l_costs_one_request_and_a_head_per_rounded_size(origin, wan_mount, tree_root):
    server, m = wan_mount
    directory = os.path.join(tree_root, "pub", "linux", "kernel", "v6.x")
    sizes = {n: os.stat(os.path.join(directory, n)).st_size for n in os.listdir(directory)}
    assert sorted(os.listdir(m.path("linux", "kernel", "v6.x"))) == sorted(sizes)
    for name, size in sizes.items():
        assert os.stat(m.path("linux", "kernel", "v6.x", name)).st_size == size
    assert listings(server).count("/pub/linux/kernel/v6.x/") == 1
    heads = [r.uri.rsplit("/", 1)[1] for r in server.requests()
             if r.method == "HEAD" and "/v6.x/" in r.uri]
    # nginx shows sizes up to 9999 in bytes and rounds larger ones ("15K",
    # "132M"): those, and only those, need a HEAD, once each.
    exact = origin[2]
    assert sorted(heads) == ([] if exact else sorted(n for n, s in sizes.items() if s > 9999))
    # Thousands of HEADs are multiplexed as HTTP/2 streams: the mount opens
    # a connection or two, not one per request or per concurrent request.
    assert len({r.connection for r in server.requests()}) <= 2


def test_deep_file_never_listed(wan_mount, tree_root):
    server, m = wan_mount
    with open(m.path(*DEEP.split("/")), "rb") as f:
        data = f.read()
    with open(os.path.join(tree_root, "pub", DEEP), "rb") as f:
        assert hashlib.sha256(data).digest() == hashlib.sha256(f.read()).digest()
    assert listings(server) == ["/pub/", "/pub/a/", "/pub/a/b/", "/pub/a/b/c/",
                                "/pub/a/b/c/d/", "/pub/a/b/c/d/e/"]
    assert [r.method for r in server.requests() if r.uri.endswith(DEEP)] in (["GET"],
                                                                             ["HEAD", "GET"])
