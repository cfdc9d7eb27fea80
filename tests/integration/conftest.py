"""Fixtures: the generated tree, real nginx servers, httphsm mounts."""
import hashlib
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from support.mount import Mount, httphsm_binary  # noqa: E402
from support.nginx import Nginx  # noqa: E402
from support.tree import make_tree  # noqa: E402


@pytest.fixture(scope="session")
def binary():
    return httphsm_binary()


@pytest.fixture(scope="session")
def tree_root():
    return make_tree()


@pytest.fixture(scope="session")
def nginx(tree_root):
    """nginx listing exact sizes."""
    server = Nginx(tree_root, exact_size=True)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def nginx_rounded(tree_root):
    """nginx listing rounded sizes, as kernel.org does."""
    server = Nginx(tree_root, exact_size=False)
    yield server
    server.stop()


@pytest.fixture
def mount_factory(tmp_path):
    """mount_factory(url, **kw) -> Mount, unmounted at the end of the test."""
    mounts = []

    def make(url, name="mnt", cache=None, **kwargs):
        m = Mount(url, str(tmp_path / name), cache or str(tmp_path / f"{name}-cache"), **kwargs)
        mounts.append(m)
        return m

    yield make
    for m in mounts:
        m.umount()


@pytest.fixture
def mounted(nginx, mount_factory):
    """The tree's /pub/ from the exact-size nginx, FUSE mode, fresh cache."""
    nginx.clear_log()
    return mount_factory(nginx.url + "pub/")


@pytest.fixture(scope="module")
def ext4(tmp_path_factory):
    """A loop-mounted ext4 file system for caches."""
    base = tmp_path_factory.mktemp("ext4")
    image, mnt = base / "cache.img", base / "fs"
    mnt.mkdir()
    subprocess.run(["truncate", "-s", "4G", str(image)], check=True)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True)
    subprocess.run(["mount", "-o", "loop", str(image), str(mnt)], check=True)
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)])


@pytest.fixture
def fan_factory(mount_factory, ext4, request):
    """fan_factory(url, **kw): a fanotify-mode mount with a cache on ext4."""
    def make(url, name="fan", cache=None, args=()):
        tag = hashlib.sha256(request.node.name.encode()).hexdigest()[:12]
        cache = cache or str(ext4 / f"{tag}-{name}")
        try:
            return mount_factory(url, name=name, cache=cache, mode="fanotify",
                                 args=["-v", *args])
        except RuntimeError as e:
            if "no fanotify pre-content events" in str(e):
                pytest.skip(f"kernel {os.uname().release}: {e}")
            raise
    return make
