"""Small helpers about file contents, shared by the tests and benchmarks."""
import fcntl
import hashlib
import os
import subprocess
import time

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


F_SETPIPE_SZ = 1031


def waits_to_write_stdout(pid):
    """Whether process pid sleeps in write(1, ...): /proc/PID/syscall gives
    the number and arguments of the system call it is blocked in."""
    try:
        with open(f"/proc/{pid}/syscall") as f:
            fields = f.read().split()
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state == "S" and fields[:2] == ["1", "0x1"]


def tar_head(path, lines=20, timeout=120):
    """What `tar tvf path | head -<lines>` prints, with tar's lead bounded.

    With head, how far tar reads past the lines shown depends on when head
    exits (tar goes on until a write fails), from 20 KB to over 1 MB of this
    tree's tar on a loaded machine.  Here tar writes into a one-page pipe
    that is no longer read once the lines are in: it reads at most about
    three pages of listing ahead (the page read, the page in the pipe, its
    own buffer), however the scheduler runs it, and is killed once blocked.
    Every caller gets the same lines as the pipeline would print."""
    r, w = os.pipe()
    fcntl.fcntl(w, F_SETPIPE_SZ, 4096)
    tar = subprocess.Popen(["tar", "tvf", path], stdout=w, stderr=subprocess.DEVNULL)
    os.close(w)
    out = b""
    deadline = time.time() + timeout
    try:
        while out.count(b"\n") < lines and time.time() < deadline:
            chunk = os.read(r, 4096)
            if not chunk:
                break
            out += chunk
        # Its lead is final once it waits to write to the full pipe (or ends).
        while tar.poll() is None and time.time() < deadline and \
                not waits_to_write_stdout(tar.pid):
            time.sleep(0.01)
    finally:
        tar.kill()
        tar.wait()
        os.close(r)
    return b"".join(line + b"\n" for line in out.split(b"\n")[:lines])
