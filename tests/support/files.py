"""Small helpers about file contents, shared by the tests and benchmarks."""
import hashlib
import os

MiB = 1024 * 1024


def pattern(seed, size):
    """size bytes that depend on seed and on their offset (not all alike)."""
    block = hashlib.sha256(seed.encode()).digest()
    return (block * (size // len(block) + 1))[:size]


def sha256(path):
    """The SHA-256 of a file, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(MiB), b""):
            h.update(block)
    return h.hexdigest()


def snapshot(directory):
    """name -> (is_dir, size, mtime) of a directory's entries."""
    result = {}
    with os.scandir(directory) as entries:
        for e in entries:
            st = e.stat(follow_symlinks=False)
            is_dir = e.is_dir(follow_symlinks=False)
            result[e.name] = (is_dir, 0 if is_dir else st.st_size, int(st.st_mtime))
    return result
