"""Generates the kernel.org-like tree that tests, demo and benchmarks serve.

    pub/linux/kernel/v6.x/linux-6.1.tar     >= 1 GiB of real files (Debian's
                                            linux-source-6.1, uncompressed)
    pub/linux/kernel/v6.x/linux-6.1.tar.xz  the same, compressed
    pub/linux/kernel/v6.x/ChangeLog-6.1.*   small text files
    pub/many/                               5,000 files, 0 B .. 50 kB
    pub/a/b/c/d/e/deep.txt                  a path 5 directories deep
    pub/odd/                                awkward but legal names

Every mtime is a whole minute, because listings show minutes.  The tree is
made once per generator version under a cache directory and reused.
"""
import hashlib
import os
import shutil
import subprocess
import sys

GENERATOR_VERSION = "1"
SOURCE_TARBALL = "/usr/src/linux-source-6.1.tar.xz"
BASE_MTIME = 1_700_000_040  # 2023-11-14 22:14 UTC, a whole minute
MANY_FILES = 5000
ODD_NAMES = [
    "with space.txt",
    "ampersand & co.txt",
    "percent%41.txt",
    "ünïcødé-名前.txt",
    "hash#question?.txt",
    "semi;colon+plus.txt",
    "quote\"lt<gt>.txt",
    "a-very-long-file-name-that-is-longer-than-fifty-columns-for-nginx.tar.gz",
]
# Paths below pub/ that tests and benchmarks use.
V6 = "linux/kernel/v6.x"
BIG_TAR = f"{V6}/linux-6.1.tar"
TAR_XZ = f"{V6}/linux-6.1.tar.xz"
DEEP = "a/b/c/d/e/deep.txt"


def default_root():
    cache = os.environ.get("HTTPHSM_CACHE_DIR", "/var/cache/httphsm-ci")
    return os.path.join(cache, f"testtree-v{GENERATOR_VERSION}")


def many_file_size(i):
    return (i * 7919) % 50_000


def many_file_bytes(i):
    seed = hashlib.sha256(str(i).encode()).digest()
    size = many_file_size(i)
    return (seed * (size // len(seed) + 1))[:size]


def _write(path, data, mtime):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    os.utime(path, (mtime, mtime))


def _make_kernel_dir(pub):
    v6 = os.path.join(pub, "linux", "kernel", "v6.x")
    os.makedirs(v6, exist_ok=True)
    tar = os.path.join(v6, "linux-6.1.tar")
    if not os.path.exists(tar):
        tmp = tar + ".part"
        with open(tmp, "wb") as out:
            subprocess.run(["xz", "-dc", "-T0", SOURCE_TARBALL], stdout=out, check=True)
        os.replace(tmp, tar)
    os.utime(tar, (BASE_MTIME, BASE_MTIME))
    xz = os.path.join(v6, "linux-6.1.tar.xz")
    if not os.path.exists(xz):
        shutil.copyfile(SOURCE_TARBALL, xz + ".part")
        os.replace(xz + ".part", xz)
    os.utime(xz, (BASE_MTIME + 60, BASE_MTIME + 60))
    for n in range(1, 6):
        text = "".join(f"commit {n}.{k}: fix things\n" for k in range(200 * n))
        _write(os.path.join(v6, f"ChangeLog-6.1.{n}"), text.encode(), BASE_MTIME + 120 * n)


def _make_many(pub):
    many = os.path.join(pub, "many")
    for i in range(MANY_FILES):
        _write(os.path.join(many, f"file-{i:05d}.dat"), many_file_bytes(i),
               BASE_MTIME + 60 * (i % 1000))


def _make_deep_and_odd(pub):
    _write(os.path.join(pub, "a", "b", "c", "d", "e", "deep.txt"), b"five levels down\n",
           BASE_MTIME)
    for k, name in enumerate(ODD_NAMES):
        _write(os.path.join(pub, "odd", name), f"{name}\n".encode() * (k + 1),
               BASE_MTIME + 60 * k)
    os.makedirs(os.path.join(pub, "empty-dir"), exist_ok=True)


def _fix_dir_mtimes(root):
    for dirpath, dirnames, _ in os.walk(root, topdown=False):
        os.utime(dirpath, (BASE_MTIME, BASE_MTIME))


def make_tree(root=None):
    """Creates (or reuses) the tree; returns the directory served as "/"."""
    root = root or default_root()
    stamp = os.path.join(root, ".complete")
    if os.path.exists(stamp):
        return root
    pub = os.path.join(root, "pub")
    _make_kernel_dir(pub)
    _make_many(pub)
    _make_deep_and_odd(pub)
    _fix_dir_mtimes(pub)
    os.chmod(root, 0o755)
    with open(stamp, "w") as f:
        f.write(GENERATOR_VERSION + "\n")
    return root


if __name__ == "__main__":
    print(make_tree(sys.argv[1] if len(sys.argv) > 1 else None))
