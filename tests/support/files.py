"""Small helpers about file contents, shared by the tests and benchmarks."""
import hashlib

MiB = 1024 * 1024


def sha256(path):
    """The SHA-256 of a file, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(MiB), b""):
            h.update(block)
    return h.hexdigest()
