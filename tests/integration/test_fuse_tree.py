"""FUSE mode against a real nginx serving the kernel.org-like tree."""
import errno
import os
import subprocess

import pytest

from support.files import MiB, sha256, snapshot, tar_head
from support.tree import BIG_TAR, MANY_FILES, ODD_NAMES, V6

pytestmark = pytest.mark.timeout(600)


def gets(nginx, suffix):
    return [r for r in nginx.requests() if r.method == "GET" and r.uri.endswith(suffix)]


@pytest.mark.parametrize("directory", ["", V6, "many", "odd", "a/b/c/d/e", "empty-dir"])
def test_entries_match_the_served_tree(mounted, tree_root, directory):
    served = snapshot(os.path.join(tree_root, "pub", directory))
    assert snapshot(mounted.path(directory)) == served
    assert served or directory == "empty-dir"


def test_odd_names_are_exact(mounted):
    assert sorted(os.listdir(mounted.path("odd"))) == sorted(ODD_NAMES)
    for k, name in enumerate(ODD_NAMES):
        with open(mounted.path("odd", name), "rb") as f:
            assert f.read() == f"{name}\n".encode() * (k + 1)


def test_deep_path_without_listing_parents_first(mounted, nginx):
    with open(mounted.path("a", "b", "c", "d", "e", "deep.txt"), "rb") as f:
        assert f.read() == b"five levels down\n"
    listed = [r.uri for r in nginx.requests() if r.uri.endswith("/")]
    assert listed == ["/pub/", "/pub/a/", "/pub/a/b/", "/pub/a/b/c/", "/pub/a/b/c/d/",
                      "/pub/a/b/c/d/e/"]


@pytest.mark.parametrize("name", [f"{V6}/linux-6.1.tar.xz", f"{V6}/ChangeLog-6.1.3",
                                  "many/file-00007.dat", "many/file-04999.dat"])
def test_content_sha256_matches(mounted, tree_root, name):
    assert sha256(mounted.path(name)) == sha256(os.path.join(tree_root, "pub", name))


def test_whole_big_tar_matches_and_is_fetched_once(mounted, tree_root, nginx):
    original = os.path.join(tree_root, "pub", BIG_TAR)
    assert sha256(mounted.path(BIG_TAR)) == sha256(original)
    size = os.path.getsize(original)
    fetched = sum(r.bytes for r in gets(nginx, BIG_TAR))
    assert fetched == size  # every byte exactly once: no overlap, no refetch
    assert all(r.status == 206 for r in gets(nginx, BIG_TAR))
    # Writing the cache file did not leave its mtime at "now".
    cached = os.path.join(mounted.cache_dir, "tree", BIG_TAR)
    assert int(os.stat(cached).st_mtime) == int(os.stat(original).st_mtime)
    # Sequential reading grows the window: far fewer requests than 256 KiB
    # pieces (it ramps up over the first 128 MiB, to 8 MiB windows).
    assert len(gets(nginx, BIG_TAR)) < size / (2 * MiB)


def test_tar_listing_head_transfers_little(mounted, tree_root, nginx):
    local = tar_head(os.path.join(tree_root, "pub", BIG_TAR))
    nginx.clear_log()
    remote = tar_head(mounted.path(BIG_TAR))
    assert remote == local and len(remote.splitlines()) == 20
    fetched = sum(r.bytes for r in gets(nginx, BIG_TAR))
    assert 0 < fetched <= 2 * MiB, fetched


def test_ls_of_exact_listing_costs_one_request(mounted, nginx, tree_root):
    mounted.path()  # the root was listed by the mount itself
    nginx.clear_log()
    out = subprocess.run(["ls", "-l", "--time-style=+%s", mounted.path("many")],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    lines = [line for line in out.splitlines() if line.startswith("-")]
    assert len(lines) == MANY_FILES
    requests = nginx.requests()
    assert [(r.method, r.uri) for r in requests] == [("GET", "/pub/many/")]
    sizes = {line.split()[-1]: int(line.split()[4]) for line in lines}
    for i in (0, 1, 2, 1234, 4999):
        name = f"file-{i:05d}.dat"
        assert sizes[name] == os.path.getsize(os.path.join(tree_root, "pub", "many", name))


def test_rounded_listing_gets_exact_sizes(nginx_rounded, mount_factory, tree_root):
    nginx_rounded.clear_log()
    m = mount_factory(nginx_rounded.url + "pub/")
    served = snapshot(os.path.join(tree_root, "pub", "many"))
    assert snapshot(m.path("many")) == served
    heads = [r for r in nginx_rounded.requests() if r.method == "HEAD"]
    rounded = sum(1 for _, size, _ in served.values() if size > 9999)
    assert len(heads) == rounded  # HEAD exactly for the sizes shown rounded
    # ...in parallel over kept-alive connections (8 transfers by default).
    assert len({r.connection for r in heads}) <= 8
    assert snapshot(m.path(V6)) == snapshot(os.path.join(tree_root, "pub", V6))
    original = os.path.join(tree_root, "pub", "many", "file-04999.dat")
    assert sha256(m.path("many", "file-04999.dat")) == sha256(original)


def test_remount_reuses_the_cache(nginx, mount_factory, tree_root, tmp_path):
    name = f"{V6}/linux-6.1.tar.xz"
    cache = str(tmp_path / "shared-cache")
    first = mount_factory(nginx.url + "pub/", name="first", cache=cache)
    digest = sha256(first.path(name))
    first.umount()
    nginx.clear_log()
    second = mount_factory(nginx.url + "pub/", name="second", cache=cache)
    assert sha256(second.path(name)) == digest == sha256(os.path.join(tree_root, "pub", name))
    assert nginx.requests() == []  # not even a listing


def test_read_only(mounted):
    with pytest.raises(OSError) as e:
        open(mounted.path("odd", ODD_NAMES[0]), "w")
    assert e.value.errno == errno.EROFS
    with pytest.raises(OSError) as e:
        os.mkdir(mounted.path("newdir"))
    assert e.value.errno == errno.EROFS


def test_missing_names(mounted):
    assert not os.path.exists(mounted.path("no-such-file"))
    assert not os.path.exists(mounted.path("no-such-dir", "x"))
