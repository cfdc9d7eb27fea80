#!/usr/bin/env python3
"""FUSE vs fanotify vs peers on a kernel.org-like tree served by a local nginx.

    bench/run.py [--contenders LIST] [--repeat N] [--link none|W1|W2] [--out DIR]
                 [--update-readme]

--link W1 or W2 puts the emulated WAN link of tests/support/wanlink.py (W1:
50 ms RTT, 100 Mbit/s; W2: 10 ms, 1 Gbit/s) in front of the origins, which
then serve HTTPS + HTTP/2 with a certificate from a CA made for the run;
every contender verifies it with that CA.

Contenders: local (the file on local disk), curl (the network path alone),
httphsm-fuse, httphsm-fanotify, httpdirfs (Debian 1.2.5), rclone-off and
rclone-full (`rclone mount :http:` with --vfs-cache-mode off / full).

Workloads (cold = fresh mount with an empty cache and dropped page cache;
warm = the same again once everything was read):
  tar-head   `tar tvf linux-6.1.tar | head -20` (1.3 GB tar): time, bytes fetched
  xz-head    `xz -dc linux-6.1.tar.xz | tar tv | head -5`: time, bytes fetched
  deep       first byte of a file 5 directories deep, never listed before
  ls         `ls -l` of a 5,000-entry directory, exact and rounded listings:
             time and requests
  rand       4 KiB random preads, p50/p99, with 1/4/16 threads (--threads)
  seq        sequential read throughput, with 1/4/16 threads
Each figure is the median of --repeat runs.  A contender that fails a
workload is reported as failed with its error.  Ratios (contender / local,
httphsm / rclone) come from the same run.
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
from support.mount import REPO, Mount, is_mounted, walk_to  # noqa: E402
from support.nginx import Nginx  # noqa: E402
from support.tls import make_ca  # noqa: E402
from support.wanlink import LINKS, WanLink  # noqa: E402
from support.tree import BIG_TAR, DEEP, TAR_XZ, make_tree  # noqa: E402

READBENCH = os.path.join(REPO, "build", "readbench")
# The interpreter python3-matplotlib is installed for, whatever python3 runs this.
DEBIAN_PYTHON = "/usr/bin/python3"
ALL = ["local", "curl", "httphsm-fuse", "httphsm-fanotify", "httpdirfs", "rclone-off",
       "rclone-full"]


class Failed(Exception):
    pass


def drop_page_cache():
    subprocess.run(["sync"])
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def timed(cmd, timeout=600):
    start = time.monotonic()
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=timeout)
    elapsed = time.monotonic() - start
    if r.returncode != 0 and "head" not in cmd:
        raise Failed((r.stderr or r.stdout).strip().splitlines()[-1:] or f"exit {r.returncode}")
    return elapsed, r


def settle(server, quiet=1.0, limit=15):
    """Waits until the server logged nothing new for `quiet` seconds: a
    client may still be transferring after the command returned, and nginx
    logs a request when it ends."""
    deadline, last, last_change = time.time() + limit, -1, time.time()
    while time.time() < deadline:
        size = os.path.getsize(server.log_path) if os.path.exists(server.log_path) else 0
        if size != last:
            last, last_change = size, time.time()
        elif time.time() - last_change >= quiet:
            return
        time.sleep(0.1)


def wait_for(path, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if is_mounted(path):
            return
        time.sleep(0.1)
    raise Failed(f"{path} did not get mounted")


class Contender:
    """A way to see the tree as files; mount() gives a fresh, cold view."""
    network = True

    def __init__(self, name, work):
        self.name = name
        self.work = os.path.join(work, name)

    def mount(self, url):
        raise NotImplementedError

    def umount(self):
        pass

    def path(self, rel):
        return os.path.join(self.root, rel)

    def cache_file(self, rel):
        return None

    def walk_to(self, rel):
        """Done for every contender, so that all start from the same point."""
        walk_to(self.root, rel)

    def explain(self, error):
        """What went wrong, in one line: the contender's own words if any."""
        return str(error).strip().splitlines()[-1][:300] if str(error).strip() else repr(error)


class Local(Contender):
    network = False

    def __init__(self, name, work, tree_root):
        super().__init__(name, work)
        self.tree_root = tree_root

    def mount(self, url):
        self.root = os.path.join(self.tree_root, "pub")
        drop_page_cache()


class Httphsm(Contender):
    def __init__(self, name, work, mode, cacert):
        super().__init__(name, work)
        self.mode = mode
        self.args = ["--cacert", cacert] if cacert else []
        self.mounted = None

    def mount(self, url):
        self.umount()
        shutil.rmtree(self.work, ignore_errors=True)
        os.makedirs(self.work)
        try:
            self.mounted = Mount(url, os.path.join(self.work, "mnt"),
                                 os.path.join(self.work, "cache"), mode=self.mode,
                                 args=self.args)
        except RuntimeError as e:
            raise Failed(str(e).splitlines()[-1])
        self.root = self.mounted.mountpoint
        drop_page_cache()

    def umount(self):
        if self.mounted:
            self.mounted.umount()
            self.mounted = None

    def cache_file(self, rel):
        """The file in the cache tree: what fanotify mode's reads should match."""
        return os.path.join(self.mounted.cache_dir, "tree", rel) if self.mode == "fanotify" else None


class External(Contender):
    """httpdirfs and rclone: started as daemons, stopped with fusermount."""

    def __init__(self, name, work, command):
        super().__init__(name, work)
        self.command = command

    def mount(self, url):
        self.umount()
        shutil.rmtree(self.work, ignore_errors=True)
        self.root = os.path.join(self.work, "mnt")
        os.makedirs(self.root)
        os.makedirs(os.path.join(self.work, "cache"))
        cmd = self.command(url, self.root, os.path.join(self.work, "cache"))
        self.log = open(os.path.join(self.work, "log"), "w")
        self.process = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        try:
            wait_for(self.root, 20)
            os.listdir(self.root)
        except (Failed, OSError) as e:
            self.umount()
            with open(os.path.join(self.work, "log")) as f:
                lines = [line.strip() for line in f if line.strip()]
            raise Failed("; ".join(lines[-2:]) or str(e))
        drop_page_cache()

    def explain(self, error):
        try:
            with open(os.path.join(self.work, "log")) as f:
                lines = [line.strip() for line in f if line.strip()]
        except OSError:
            lines = []
        words = [line for line in lines if "rror" in line or "not support" in line]
        return (words[0][:300] + " -> " if words else "") + super().explain(error)

    def umount(self):
        if getattr(self, "root", None) and is_mounted(self.root):
            subprocess.run(["fusermount3", "-u", "-z", self.root], capture_output=True)
            subprocess.run(["fusermount", "-u", "-z", self.root], capture_output=True)
        if getattr(self, "process", None) and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()


def make_contender(name, work, tree_root, cacert=None):
    """Each run as its users run it; cacert: the CA of an HTTPS origin."""
    if name == "local":
        return Local(name, work, tree_root)
    if name == "httphsm-fuse":
        return Httphsm(name, work, "fuse", cacert)
    if name == "httphsm-fanotify":
        return Httphsm(name, work, "fanotify", cacert)
    if name == "httpdirfs":
        # Without --no-range-check it refuses nginx (no Accept-Ranges on
        # directory URLs) and the mount fails.
        return External(name, work, lambda url, mnt, cache: [
            "httpdirfs", "-f", "--cache", "--cache-location", cache, "--no-range-check",
            *(["--cacert", cacert] if cacert else []), url, mnt])
    if name.startswith("rclone-"):
        mode = name.split("-", 1)[1]
        return External(name, work, lambda url, mnt, cache: [
            "rclone", "mount", ":http:", mnt, "--http-url", url, "--read-only",
            "--vfs-cache-mode", mode, "--cache-dir", cache, "--dir-cache-time", "1h",
            *(["--ca-cert", cacert] if cacert else [])])
    raise ValueError(name)


def fresh_ext4():
    """Caches go to a new ext4 file system: fanotify mode needs one, and a
    file system churned by earlier runs makes creating files slow.  discard
    gives deleted caches back (the QEMU guest keeps the image in memory)."""
    work = tempfile.mkdtemp(prefix="httphsm-bench-", dir="/var/tmp")
    image = work + ".img"
    subprocess.run(["truncate", "-s", "16G", image], check=True)
    subprocess.run(["mkfs.ext4", "-q", "-F", image], check=True)
    subprocess.run(["mount", "-o", "loop,discard", image, work], check=True)
    return work, image


def median(values):
    return statistics.median(values) if values else None


class Bench:
    def __init__(self, args):
        self.args = args
        self.tree_root = make_tree()
        self.work, self.image = fresh_ext4()
        self.cacert, tls, self.links = None, None, {}
        if args.link != "none":
            self.cacert, cert, key = make_ca(tempfile.mkdtemp(prefix="httphsm-ca-"))
            tls = (cert, key)
        self.exact = Nginx(self.tree_root, exact_size=True, tls=tls)
        self.rounded = Nginx(self.tree_root, exact_size=False, tls=tls)
        if tls:
            for server in (self.exact, self.rounded):
                self.links[server] = WanLink("127.0.0.1", server.port, args.link)
        self.results = {}

    def url(self, server, path=""):
        """The URL of path on server as contenders reach it (through the link)."""
        link = self.links.get(server)
        return (f"https://127.0.0.1:{link.port}/" if link else server.url) + "pub/" + path

    def fresh(self, c, url):
        """A fresh mount (empty cache, dropped page cache); the server's files
        are then read once, as a busy server would have them in memory, so
        that cold figures measure the client, not the server's disk."""
        c.mount(url)
        if c.network:
            for name in (BIG_TAR, TAR_XZ):
                subprocess.run(["cat", os.path.join(self.tree_root, "pub", name)],
                               stdout=subprocess.DEVNULL, check=True)

    def record(self, contender, workload, value):
        self.results.setdefault(contender, {})[workload] = value
        print(f"  {contender:17} {workload:22} {value}", flush=True)

    def repeat(self, contender, fn):
        """Median of fn() over --repeat fresh runs; fn returns a dict."""
        runs = []
        for _ in range(self.args.repeat):
            runs.append(fn())
        return {k: median([r[k] for r in runs if k in r]) for k in runs[0]}

    def cold_and_warm(self, c, workload, url, run):
        """run() -> dict, once on a fresh mount (cold), once more (warm)."""
        server = self.rounded if url == "rounded" else self.exact

        def both():
            self.fresh(c, self.url(server))
            server.clear_log()
            cold = run(server)
            server.clear_log()
            warm = run(server)
            c.umount()
            return {**{f"cold_{k}": v for k, v in cold.items()},
                    **{f"warm_{k}": v for k, v in warm.items()}}
        try:
            self.record(c.name, workload, self.repeat(c.name, both))
        except (Failed, subprocess.TimeoutExpired, OSError) as e:
            c.umount()
            self.record(c.name, workload, {"failed": c.explain(e)})

    def pipeline(self, c, cmd, fetched_file):
        def run(server):
            c.walk_to(fetched_file)
            elapsed, r = timed(cmd.format(c.path("")))
            lines = len(r.stdout.splitlines())
            if lines < 5:
                raise Failed((r.stderr.strip().splitlines() or ["no output"])[-1])
            settle(server)
            return {"seconds": round(elapsed, 4),
                    "bytes": server.bytes_sent(fetched_file) if c.network else 0}
        return run

    def workloads(self, c):
        self.cold_and_warm(c, "tar-head", "exact", self.pipeline(
            c, "tar tvf {}" + BIG_TAR + " | head -20", BIG_TAR))
        self.cold_and_warm(c, "xz-head", "exact", self.pipeline(
            c, "xz -dc {}" + TAR_XZ + " | tar tv | head -5", TAR_XZ))

        def deep(server):
            elapsed, r = timed(f"head -c1 {c.path(DEEP)}")
            if r.stdout != "f":
                raise Failed(r.stderr.strip() or "no byte")
            return {"seconds": round(elapsed, 4)}
        self.cold_and_warm(c, "deep-first-byte", "exact", deep)

        def ls(server):
            elapsed, r = timed(f"ls -l {c.path('many')}")
            entries = len(r.stdout.splitlines()) - 1
            if entries != 5000:
                raise Failed(f"{entries} entries listed")
            settle(server)
            return {"seconds": round(elapsed, 4), "requests": len(server.requests())}
        self.cold_and_warm(c, "ls-5000-exact", "exact", ls)
        self.cold_and_warm(c, "ls-5000-rounded", "rounded", ls)

        for threads in self.args.threads:
            def rand(server, threads=threads, path=None):
                c.walk_to(BIG_TAR)
                ops = 20000 if server is None else 400
                out = subprocess.run([READBENCH, "random", path or c.path(BIG_TAR), str(ops),
                                      str(threads), "20"], capture_output=True, text=True,
                                     timeout=600)
                result = json.loads(out.stdout)
                if "error" in result:
                    raise Failed(result["error"])
                return {"p50_us": round(result["p50_ns"] / 1000, 2),
                        "p99_us": round(result["p99_ns"] / 1000, 2)}
            self.seq_then_rand(c, threads, rand)

    def seq_then_rand(self, c, threads, rand):
        """Cold sequential read of the big tar (which makes it local), then
        warm sequential and warm random reads; cold random on its own mount."""
        def seq(path=None):
            c.walk_to(BIG_TAR)
            out = subprocess.run([READBENCH, "seq", path or c.path(BIG_TAR), str(threads)],
                                 capture_output=True, text=True, timeout=900)
            result = json.loads(out.stdout)
            if "error" in result:
                raise Failed(result["error"])
            return result["mib_per_s"]

        def run():
            self.fresh(c, self.url(self.exact))
            cold_rand = rand(self.exact)
            self.fresh(c, self.url(self.exact))
            cold = seq()
            # The cold read left the cache dirty: let writeback finish, and
            # read once unmeasured, so that the first warm figure is not
            # slower than the rest for reasons that have nothing to do with
            # the contender.
            subprocess.run(["sync"], check=True)
            seq()
            warm = seq()
            warm_rand = rand(None)
            result = {"cold_seq_mib_s": cold, "warm_seq_mib_s": warm,
                      "cold_rand_p50_us": cold_rand["p50_us"],
                      "cold_rand_p99_us": cold_rand["p99_us"],
                      "warm_rand_p50_us": warm_rand["p50_us"],
                      "warm_rand_p99_us": warm_rand["p99_us"]}
            native = c.cache_file(BIG_TAR)
            if native:
                result.update(self.against_cache_file(seq, rand, native))
            c.umount()
            return result
        try:
            self.record(c.name, f"read-{threads}-threads", self.repeat(c.name, run))
        except (Failed, subprocess.TimeoutExpired, OSError, json.JSONDecodeError) as e:
            c.umount()
            self.record(c.name, f"read-{threads}-threads", {"failed": c.explain(e)})

    @staticmethod
    def against_cache_file(seq, rand, native, pairs=3):
        """The same reads through the mount and on the cache file, bypassing
        it, in alternation: whatever reads a file first after the warm runs
        above is a few per cent slower, mount or not, which measuring one
        after the other would charge to the second."""
        runs = [(seq(native), rand(None, path=native)["p50_us"], seq(), rand(None)["p50_us"])
                for _ in range(pairs)]
        median = [statistics.median(column) for column in zip(*runs)]
        return {"native_warm_seq_mib_s": median[0], "native_warm_rand_p50_us": median[1],
                "paired_warm_seq_mib_s": median[2], "paired_warm_rand_p50_us": median[3]}

    def curl(self):
        """The network path alone: curl to /dev/null, and curl into a file on
        the caches' file system (what any cache has to do as well)."""
        url = self.url(self.exact, BIG_TAR)
        size = os.path.getsize(os.path.join(self.tree_root, "pub", BIG_TAR))
        target = os.path.join(self.work, "curl-output")

        def speed(output):
            drop_page_cache()
            subprocess.run(["cat", os.path.join(self.tree_root, "pub", BIG_TAR)],
                           stdout=subprocess.DEVNULL, check=True)
            start = time.monotonic()
            subprocess.run(["curl", "-sf", "-o", output, url] +
                           (["--cacert", self.cacert] if self.cacert else []), check=True)
            elapsed = time.monotonic() - start
            if output != "/dev/null":
                os.unlink(output)
            return round(size / 1048576 / elapsed, 1)

        def run():
            return {"cold_seq_mib_s": speed("/dev/null"), "to_file_mib_s": speed(target)}
        self.record("curl", "read-1-threads", self.repeat("curl", run))

    def run(self):
        for name in self.args.contenders:
            print(f"{name}:", flush=True)
            if name == "curl":
                self.curl()
                continue
            c = make_contender(name, self.work, self.tree_root, self.cacert)
            try:
                self.workloads(c)
            finally:
                c.umount()

    def close(self):
        for link in self.links.values():
            link.stop()
        self.exact.stop()
        self.rounded.stop()
        subprocess.run(["umount", "-l", self.work])
        os.unlink(self.image)
        os.rmdir(self.work)


def environment(link):
    kvm = os.path.exists("/dev/kvm")
    in_guest = os.path.exists("/etc/httphsm-guest") or "hypervisor" in open("/proc/cpuinfo").read()
    return {
        "date": datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"),
        "kernel": platform.release(),
        "cpus": os.cpu_count(),
        "where": os.environ.get("HTTPHSM_BENCH_WHERE", "host"),
        "virtualised": in_guest,
        "kvm_device": kvm,
        "link": None if link == "none" else
        {"name": link, "rtt_ms": LINKS[link][0], "rate_mbit": LINKS[link][1]},
    }


def setup():
    """The peers, the plotting library and a fresh build of httphsm."""
    subprocess.run([os.path.join(REPO, "scripts", "install-deps"),
                    "httpdirfs", "rclone", "python3-matplotlib"], check=True)
    subprocess.run([os.path.join(REPO, "scripts", "build")], check=True,
                   stdout=subprocess.DEVNULL)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--contenders", default=",".join(ALL))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", default="1,4,16",
                        help="reader counts of the rand and seq workloads")
    parser.add_argument("--link", choices=["none", *LINKS], default="none",
                        help="the emulated WAN link in front of HTTPS origins (default: none)")
    parser.add_argument("--out", help="default: bench/results/latest[-LINK]")
    parser.add_argument("--update-readme", action="store_true",
                        help="rewrite the results section of README.md")
    parser.add_argument("--no-report", action="store_true",
                        help="only write results.json (e.g. in the QEMU guest)")
    parser.add_argument("--no-setup", action="store_true",
                        help="do not install packages or build (the QEMU guest has both)")
    args = parser.parse_args()
    args.contenders = [c for c in args.contenders.split(",") if c]
    if not args.out:
        args.out = os.path.join(HERE, "results",
                                "latest" + ("" if args.link == "none" else "-" + args.link))
    try:
        args.threads = [int(t) for t in args.threads.split(",") if t]
    except ValueError:
        parser.error("--threads takes numbers, e.g. 1,4,16")
    for c in args.contenders:
        if c not in ALL:
            parser.error(f"unknown contender {c}")
    if os.geteuid() != 0:
        parser.error("run as root (mounts, drop_caches)")
    if not args.no_setup:
        setup()
    bench = Bench(args)
    try:
        bench.run()
    finally:
        bench.close()
    os.makedirs(args.out, exist_ok=True)
    data = {"environment": environment(args.link), "repeat": args.repeat, "results": bench.results}
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(data, f, indent=1)
    if not args.no_report:
        subprocess.run([DEBIAN_PYTHON, os.path.join(HERE, "report.py"), args.out] +
                       (["--update-readme"] if args.update_readme else []), check=True)


if __name__ == "__main__":
    main()
