"""Running `httphsm mount` for tests, the demo and the benchmarks."""
import os
import signal
import subprocess
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def httphsm_binary():
    path = os.environ.get("HTTPHSM_BIN", os.path.join(REPO, "build", "httphsm"))
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"{path} is not built (cmake -B build && cmake --build build)")
    return path


def is_mounted(path):
    path = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == path for line in f)


def walk_to(root, relpath):
    """Lists each directory above relpath: fanotify mode on a mainline kernel
    finds only names in directories that were listed."""
    parts = relpath.split("/")[:-1]
    for i in range(len(parts) + 1):
        os.listdir(os.path.join(root, *parts[:i]))


class Mount:
    """An httphsm daemon serving url on mountpoint with cache_dir."""

    def __init__(self, url, mountpoint, cache_dir, mode="fuse", args=(), timeout=120):
        self.url = url
        self.mountpoint = mountpoint
        self.cache_dir = cache_dir
        self.mode = mode
        os.makedirs(mountpoint, exist_ok=True)
        cmd = [httphsm_binary(), "mount", "--mode", mode, "--cache-dir", cache_dir,
               *args, url, mountpoint]
        self.result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if self.result.returncode != 0:
            raise RuntimeError(f"mount failed ({self.result.returncode}): {self.result.stderr}")
        self.pid = self.daemon_pid()

    def daemon_pid(self):
        with open(os.path.join(self.cache_dir, "lock")) as f:
            return int(f.read().strip())

    def path(self, *parts):
        return os.path.join(self.mountpoint, *parts)

    def log(self):
        try:
            with open(os.path.join(self.cache_dir, "httphsm.log")) as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def daemon_alive(self):
        try:
            os.kill(self.pid, 0)
            return True
        except ProcessLookupError:
            return False

    def wait_daemon_exit(self, timeout=30):
        deadline = time.time() + timeout
        while self.daemon_alive() and time.time() < deadline:
            time.sleep(0.05)
        return not self.daemon_alive()

    def kill(self, sig=signal.SIGKILL):
        os.kill(self.pid, sig)
        self.wait_daemon_exit()

    def umount(self):
        """Stops the daemon; returns its log.  Never leaves a mount behind."""
        try:  # a guardian may have restarted the daemon under another pid
            self.pid = self.daemon_pid()
        except (OSError, ValueError):
            pass
        if is_mounted(self.mountpoint):
            r = subprocess.run([httphsm_binary(), "umount", self.mountpoint],
                               capture_output=True, text=True, timeout=60)
            if r.returncode != 0 and is_mounted(self.mountpoint):
                subprocess.run(["umount", "-l", self.mountpoint], capture_output=True)
        if not self.wait_daemon_exit():
            os.kill(self.pid, signal.SIGKILL)
        return self.log()
