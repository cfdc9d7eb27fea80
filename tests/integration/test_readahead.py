"""Read-ahead earns its bytes: a reader that stops early costs little more
than it read, in both modes (nginx on loopback; the WAN case is in
test_wan.py).  Asserted on nginx's access log, over several fresh mounts,
since how much crosses must not depend on how fast the reader happened to be."""
import os
import subprocess
import time

import pytest

from support.files import MiB, tar_head
from support.mount import walk_to
from support.tree import BIG_TAR

pytestmark = pytest.mark.timeout(300)

FRESH_MOUNTS = 3


def settled_bytes(nginx, suffix, quiet=1.0, limit=20):
    """Bytes sent for suffix once the log has been quiet for `quiet` s:
    nginx logs a request when it ends, and a read-ahead the reader left
    behind ends (or is cancelled) after tar is gone."""
    deadline, last, last_change = time.time() + limit, None, time.time()
    while time.time() < deadline:
        sent = nginx.bytes_sent(suffix)
        if sent != last:
            last, last_change = sent, time.time()
        elif time.time() - last_change >= quiet:
            break
        time.sleep(0.1)
    return last


@pytest.mark.parametrize("mode", ["fuse", "fanotify"])
def test_tar_head_costs_at_most_1_mib(nginx, mount_factory, fan_factory, tree_root, mode):
    want = tar_head(os.path.join(tree_root, "pub", BIG_TAR))
    sent = []
    for i in range(FRESH_MOUNTS):
        name = f"{mode}{i}"
        m = (fan_factory(nginx.url + "pub/", name=name) if mode == "fanotify"
             else mount_factory(nginx.url + "pub/", name=name))
        walk_to(m.mountpoint, BIG_TAR)
        nginx.clear_log()
        got = tar_head(m.path(BIG_TAR))
        assert got == want and len(got.splitlines()) == 20
        sent.append(settled_bytes(nginx, BIG_TAR))
        m.umount()
    # tar reads (and seeks over) its first ~190 KB here: the bound,
    # max(1 MiB, 1.25x what the reader read), is 1 MiB.
    assert all(0 < s <= MiB for s in sent), sent


@pytest.mark.parametrize("mode", ["fuse", "fanotify"])
@pytest.mark.parametrize("length", [600_000, 4_000_000])
def test_reader_stopping_early_costs_little_more(nginx, mount_factory, fan_factory, tree_root,
                                                 mode, length):
    """`head -c`: a plain sequential reader, as a tar with bigger members
    would be; the bound is max(1 MiB, 1.25x what it read)."""
    with open(os.path.join(tree_root, "pub", BIG_TAR), "rb") as f:
        want = f.read(length)
    sent = []
    for i in range(FRESH_MOUNTS):
        name = f"{mode}{i}"
        m = (fan_factory(nginx.url + "pub/", name=name) if mode == "fanotify"
             else mount_factory(nginx.url + "pub/", name=name))
        walk_to(m.mountpoint, BIG_TAR)
        nginx.clear_log()
        got = subprocess.run(["head", "-c", str(length), m.path(BIG_TAR)], capture_output=True,
                             timeout=120, check=True).stdout
        assert got == want
        sent.append(settled_bytes(nginx, BIG_TAR))
        m.umount()
    assert all(length <= s <= max(MiB, 1.25 * length) for s in sent), sent
