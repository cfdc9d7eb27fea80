#!/usr/bin/env python3
"""FUSE vs fanotify vs peers on a kernel.org-like tree served by a local nginx.

    bench/run.py [--contenders LIST] [--link LIST] [--workloads LIST] [--repeat N]
                 [--threads LIST] [--out DIR] [--update-readme] [--no-report]
                 [--no-setup]

Runs every workload below for every contender through every link of --link,
writes the medians into DIR/results.json (one section per link) and has
bench/report.py turn them into DIR/results.md and one plot per link,
DIR/bench-LINK.png.  Needs root (mounts, drop_caches).

Links (--link, a comma list; default: none,W1,W2, all in one run):
  none   plain HTTP from nginx on loopback: what the clients themselves cost.
  W1     the emulated WAN link of tests/support/wanlink.py, 50 ms RTT,
         100 Mbit/s (11.92 MiB/s);
  W2     the same, 10 ms RTT, 1000 Mbit/s (119.2 MiB/s).
Through W1 and W2 the origins serve HTTPS + HTTP/2 with a certificate from a
CA made for the run, which every contender verifies.  The links run one
after another; each gets its own origins, relays and fresh mounts, and the
same workloads for every contender.  results.json is rewritten after each
link, so an interrupted run keeps the links it finished.

Contenders (--contenders, a comma list; default: all):
  local             the file on local disk (the reference; no network)
  curl              the network path alone: one GET to /dev/null and one into
                    a file on the caches' file system
  httphsm-fuse      httphsm mount --mode fuse
  httphsm-fanotify  httphsm mount --mode fanotify --populate lazy (on a kernel
                    without lookup events fanotify mode lists the tree in the
                    background from the mount on, which would turn the cold
                    metadata figures into warm ones; bench/crawl.py measures
                    that crawl)
  httpdirfs         Debian's httpdirfs 1.2.5, --cache, --no-range-check
                    (without it, it refuses nginx: directory URLs have no
                    Accept-Ranges)
  rclone-off        rclone mount :http: --vfs-cache-mode off
  rclone-full       rclone mount :http: --vfs-cache-mode full

Order and repetitions (--repeat N, default 3): repetition i (0, 1, ...) runs
the contender list rotated left by i, and each contender runs all of its
workloads once before the next one starts (A B C, then B C A, then C A B):
neither a slow drift of the machine nor a neighbour's leftovers (page cache,
connections in TIME_WAIT, the origin's state) always favours the same
contender.  Every figure is the median of the N repetitions.  A contender
that fails a workload is reported as failed with its error (the contender's
own words where it logged any); its later repetitions skip that workload and
the other contenders go on.

Workloads (cold = fresh mount with an empty cache and dropped page cache,
the origin's files read once so that the origin serves them from memory;
warm = the same again once everything was read):
  tar-head         `tar tvf linux-6.1.tar | head -20` (1.3 GB tar, three
                   directories below the mount root): time, bytes fetched
  xz-head          `xz -dc linux-6.1.tar.xz | tar tv | head -5`: time, bytes
  deep-first-byte  first byte of a/b/c/d/e/deep.txt, 5 directories deep,
                   none of them listed before
  ls-5000-exact    `ls -l` of a 5,000-entry directory with exact sizes in the
                   listing: time and requests sent
  ls-5000-rounded  the same with kernel.org's rounded sizes ("1.2M"), which a
                   client has to complete with a HEAD per file
  ls-5000-revalidated  the rounded `ls -l` again once the listing's time-to-
                   live (2 s: --dir-cache-time, rclone's --dir-cache-time)
                   has passed, nothing having changed: time and requests;
                   only for contenders with such an option
  read-T-threads   for each T of --threads (default 1,4,16): 4 KiB random
                   preads of the tar (p50, p99) on a fresh mount, then on
                   another fresh mount a cold sequential read in 1 MiB reads,
                   then warm sequential and warm random reads
--workloads (a comma list of the names above, "read" for the read-T-threads
and curl's read; default: all) runs only some of them, e.g. in the QEMU
guest, where TCG makes a full run take hours.
Before tar-head, xz-head and the reads the bench lists each directory above
the file (walk_to), outside the timed part: fanotify mode on a mainline
kernel finds names only in directories that were listed.

On W1 and W2 every read workload (and curl) covers only the first
SEQ_SPAN[link] bytes of the tar (256 MiB on W1, 1 GiB on W2): all 1.3 GB at
100 Mbit/s take ~110 s per read, and a full run reads it hundreds of times.
Every contender reads the same span, so the figures stay comparable; on the
loopback link the reads cover the whole file.

What the report adds: ratios against local and curl from the same link and
run; on W1 and W2 each time figure also in round trips (time / RTT) beside
its physical floor (FLOORS below) and the ratio figure / floor, and
sequential throughput as MiB/s and as a fraction of the link's rate.

Output: DIR (--out) defaults to bench/results/latest, or latest-LINKS (e.g.
latest-W1) when --link is not the default, with "-some" added when
--workloads is not, so that a partial run does not overwrite a full one.
--update-readme also rewrites the results section of README.md; --no-report
writes only results.json (e.g. in the QEMU guest); --no-setup skips
installing the peers and building httphsm.
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
ALL_LINKS = ["none", *LINKS]
ALL_WORKLOADS = ["tar-head", "xz-head", "deep-first-byte", "ls-5000-exact", "ls-5000-rounded",
                 "ls-5000-revalidated", "read"]
MIB = 1 << 20
# How much of the tar the read workloads cover on a WAN link.  At the link's
# full rate a read of the span takes ~21 s on W1 (11.9 MiB/s) and ~9 s on W2
# (119 MiB/s): long enough that the first round trips and TCP's ramp-up are a
# small part of it, short enough that the reads of a full run (each thread
# count, each repetition, each contender) fit in hours, not days.
SEQ_SPAN = {"W1": 256 * MIB, "W2": 1024 * MIB}
# The listing time-to-live of ls-5000-revalidated, and how long its `ls -l`
# may take (seconds): a client whose listing takes longer than the TTL may
# never finish.
REVALIDATE_TTL = 2
REVALIDATE_LIMIT = 60

# The physical floor of each cold time figure on a WAN link, in round trips:
# what any client must wait for, given that its connections are warm after
# the mount (which listed the mount root, pub/, to check the URL), and the
# bench's own listings before the clock starts (walk_to).  Transfer time
# (bandwidth) is left aside; the report shows it where it matters.
# workload: (round trips, derivation)
FLOORS = {
    "tar-head": (1, "the tar is 3 directories below the mount root (linux/kernel/v6.x/); the "
                 "mount listed pub/ and the bench lists linux/, linux/kernel/ and "
                 "linux/kernel/v6.x/ before it starts the clock, so no listing is left: 1 GET "
                 "of the tar's first bytes"),
    "xz-head": (1, "as tar-head: the directories are listed before the clock starts, 1 GET of "
                "the .xz's first bytes"),
    "deep-first-byte": (6, "a/, a/b/, a/b/c/, a/b/c/d/ and a/b/c/d/e/ were never listed, and a "
                        "name is known only once its parent's listing is: 5 listings one "
                        "after another, then 1 GET"),
    "ls-5000-exact": (1, "many/ is a name in the root listing the mount fetched: 1 listing, "
                      "whose exact sizes are all ls -l needs"),
    "ls-5000-rounded": (2, "1 listing, then a HEAD for the exact size of each file whose "
                        "listed size is rounded (up to 5,000), all sent at once over HTTP/2 "
                        "and back in 1 round trip (their bytes aside)"),
    "ls-5000-revalidated": (2, "both listings on the path have outlived their TTL: pub/'s "
                            "(to look many/ up) and then many/'s, each 1 conditional GET (a "
                            "304, or the same page when the server sends no validators, as "
                            "nginx's autoindex does), and nothing else when nothing changed"),
    "cold-rand": (1, "each 4 KiB read of a part not yet fetched is 1 GET with a Range on a warm "
                  "connection"),
}


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


def wait_for(path, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if is_mounted(path):
            return
        time.sleep(0.1)
    raise Failed(f"{path} did not get mounted")


class Contender:
    """A way to see the tree as files; mount() gives a fresh, cold view,
    with listings kept ttl seconds if given (for contenders that have such
    an option: has_ttl)."""
    network = True
    has_ttl = False

    def __init__(self, name, work):
        self.name = name
        self.work = os.path.join(work, name)

    def mount(self, url, ttl=None):
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


class Curl(Contender):
    """Not a file system: LinkRun.curl measures it; nothing to mount."""


class Local(Contender):
    network = False

    def __init__(self, name, work, tree_root):
        super().__init__(name, work)
        self.tree_root = tree_root

    def mount(self, url, ttl=None):
        self.root = os.path.join(self.tree_root, "pub")
        drop_page_cache()


class Httphsm(Contender):
    has_ttl = True

    def __init__(self, name, work, mode, cacert, args=()):
        super().__init__(name, work)
        self.mode = mode
        self.args = (["--cacert", cacert] if cacert else []) + list(args)
        self.mounted = None

    def mount(self, url, ttl=None):
        self.umount()
        shutil.rmtree(self.work, ignore_errors=True)
        os.makedirs(self.work)
        ttl_args = ["--dir-cache-time", f"{ttl}s"] if ttl else []
        try:
            self.mounted = Mount(url, os.path.join(self.work, "mnt"),
                                 os.path.join(self.work, "cache"), mode=self.mode,
                                 args=self.args + ttl_args)
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
        if self.mode != "fanotify":
            return None
        return os.path.join(self.mounted.cache_dir, "tree", rel)


class External(Contender):
    """httpdirfs and rclone: started as daemons, stopped with fusermount.
    command(url, mountpoint, cache, ttl) -> argv; has_ttl: whether it uses
    ttl."""

    def __init__(self, name, work, command, has_ttl=False):
        super().__init__(name, work)
        self.command = command
        self.has_ttl = has_ttl

    def mount(self, url, ttl=None):
        self.umount()
        shutil.rmtree(self.work, ignore_errors=True)
        self.root = os.path.join(self.work, "mnt")
        os.makedirs(self.root)
        os.makedirs(os.path.join(self.work, "cache"))
        cmd = self.command(url, self.root, os.path.join(self.work, "cache"), ttl)
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


def workload_group(name):
    """The --workloads name that selects workload name."""
    return "read" if name.startswith("read-") else name


def make_contender(name, work, tree_root, cacert=None):
    """Each run as its users run it; cacert: the CA of an HTTPS origin."""
    if name == "curl":
        return Curl(name, work)
    if name == "local":
        return Local(name, work, tree_root)
    if name == "httphsm-fuse":
        return Httphsm(name, work, "fuse", cacert)
    if name == "httphsm-fanotify":
        # Cold means nothing listed yet, as for every other contender.
        return Httphsm(name, work, "fanotify", cacert, ["--populate", "lazy"])
    if name == "httpdirfs":
        # Without --no-range-check it refuses nginx (no Accept-Ranges on
        # directory URLs) and the mount fails.
        return External(name, work, lambda url, mnt, cache, ttl: [
            "httpdirfs", "-f", "--cache", "--cache-location", cache, "--no-range-check",
            *(["--cacert", cacert] if cacert else []), url, mnt])
    if name.startswith("rclone-"):
        mode = name.split("-", 1)[1]
        return External(name, work, lambda url, mnt, cache, ttl: [
            "rclone", "mount", ":http:", mnt, "--http-url", url, "--read-only",
            "--vfs-cache-mode", mode, "--cache-dir", cache,
            "--dir-cache-time", f"{ttl}s" if ttl else "1h",
            *(["--ca-cert", cacert] if cacert else [])], has_ttl=True)
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


def median_of(runs):
    """One dict of medians from the dicts of several runs of a workload."""
    keys = list(dict.fromkeys(k for r in runs for k in r))
    return {k: statistics.median([r[k] for r in runs if k in r]) for k in keys}


def rotated(names, i):
    i %= len(names)
    return names[i:] + names[:i]


class Site:
    """The two origins (exact and rounded listings) as the contenders reach
    them over one link: plain HTTP on loopback, or HTTPS + HTTP/2 behind a
    WAN relay each."""

    def __init__(self, tree_root, link):
        self.link, self.tree_root = link, tree_root
        self.cacert, self.ca_dir, self.relays, self.servers = None, None, {}, []
        try:
            self.start()
        except BaseException:
            self.close()
            raise

    def start(self):
        tls = None
        if self.link != "none":
            self.ca_dir = tempfile.mkdtemp(prefix="httphsm-ca-")
            self.cacert, cert, key = make_ca(self.ca_dir)
            tls = (cert, key)
        self.exact = Nginx(self.tree_root, exact_size=True, tls=tls)
        self.servers.append(self.exact)
        self.rounded = Nginx(self.tree_root, exact_size=False, tls=tls)
        self.servers.append(self.rounded)
        if tls:
            for server in self.servers:
                self.relays[server] = WanLink("127.0.0.1", server.port, self.link)

    def url(self, server, path=""):
        """The URL of path on server as contenders reach it (through the link)."""
        relay = self.relays.get(server)
        return (f"https://127.0.0.1:{relay.port}/" if relay else server.url) + "pub/" + path

    def page_bytes(self, server, path):
        """Size of a listing page, fetched from the origin itself (not through
        the link), for the report's note on transfer times."""
        r = subprocess.run(["curl", "-sf", "-o", "/dev/null", "-w", "%{size_download}",
                            *(["--cacert", self.cacert] if self.cacert else []),
                            server.url + "pub/" + path], capture_output=True, text=True)
        return int(float(r.stdout)) if r.returncode == 0 and r.stdout else None

    def describe(self):
        """The link's part of results.json."""
        if self.link == "none":
            return {"link": None}
        rtt_ms, rate_mbit = LINKS[self.link]
        return {"link": {"name": self.link, "rtt_ms": rtt_ms, "rate_mbit": rate_mbit,
                         "rate_mib_s": rate_mbit * 1e6 / 8 / MIB},
                "seq_span_bytes": SEQ_SPAN[self.link],
                "floors": {k: {"rtt": n, "why": why} for k, (n, why) in FLOORS.items()},
                "listing_bytes": {"ls-5000-exact": self.page_bytes(self.exact, "many/"),
                                  "ls-5000-rounded": self.page_bytes(self.rounded, "many/")}}

    def close(self):
        for relay in self.relays.values():
            relay.stop()
        for server in self.servers:
            server.stop()
        if self.ca_dir:
            shutil.rmtree(self.ca_dir, ignore_errors=True)


class LinkRun:
    """All contenders through one link, in rotating order (see the module
    docstring); run() returns the link's section of results.json."""

    def __init__(self, args, site, work, tree_root):
        self.args, self.site, self.work, self.tree_root = args, site, work, tree_root
        self.span = SEQ_SPAN.get(site.link)  # None: the whole file
        self.contenders = {name: make_contender(name, work, tree_root, site.cacert)
                           for name in args.contenders}
        self.runs = {name: {} for name in args.contenders}  # name: workload: [dict]
        self.failed = {name: {} for name in args.contenders}  # name: workload: error
        self.orders = []

    def run(self):
        names = self.args.contenders
        for i in range(self.args.repeat):
            order = rotated(names, i)
            self.orders.append(order)
            print(f"{self.site.link}, repetition {i + 1}/{self.args.repeat}: "
                  f"{', '.join(order)}", flush=True)
            for name in order:
                self.once(self.contenders[name])
        return {**self.site.describe(), "orders": self.orders,
                "results": self.medians(), "runs": self.runs}

    def once(self, c):
        """Each of c's workloads once, but those that failed before."""
        print(f" {c.name}:", flush=True)
        try:
            for workload, run in self.workloads(c):
                if workload not in self.failed[c.name]:
                    self.attempt(c, workload, run)
        finally:
            c.umount()

    def attempt(self, c, workload, run):
        try:
            value = run()
        except (Failed, subprocess.TimeoutExpired, OSError, ValueError, KeyError) as e:
            # ValueError covers readbench output that is no JSON (it crashed).
            c.umount()
            self.failed[c.name][workload] = c.explain(e)
            print(f"  {c.name:17} {workload:22} failed: {self.failed[c.name][workload]}",
                  flush=True)
            return
        self.runs[c.name].setdefault(workload, []).append(value)
        print(f"  {c.name:17} {workload:22} {value}", flush=True)

    def medians(self):
        out = {}
        for name in self.args.contenders:
            out[name] = {w: median_of(runs) for w, runs in self.runs[name].items()}
            out[name].update({w: {"failed": e} for w, e in self.failed[name].items()})
        return out

    def fresh(self, c, server, ttl=None):
        """A fresh mount (empty cache, dropped page cache); the server's files
        are then read once, as a busy server would have them in memory, so
        that cold figures measure the client, not the server's disk."""
        c.mount(self.site.url(server), ttl)
        if c.network:
            for name in (BIG_TAR, TAR_XZ):
                subprocess.run(["cat", os.path.join(self.tree_root, "pub", name)],
                               stdout=subprocess.DEVNULL, check=True)

    def workloads(self, c):
        """(name, function doing one run of it) for each of c's workloads
        that --workloads asks for."""
        return [(name, run) for name, run in self.all_workloads(c)
                if workload_group(name) in self.args.workloads]

    def all_workloads(self, c):
        if c.name == "curl":
            return [("read-1-threads", self.curl)]
        exact, rounded = self.site.exact, self.site.rounded
        out = [
            ("tar-head", lambda: self.cold_and_warm(c, exact, self.pipeline(
                c, "tar tvf {}" + BIG_TAR + " | head -20", BIG_TAR))),
            ("xz-head", lambda: self.cold_and_warm(c, exact, self.pipeline(
                c, "xz -dc {}" + TAR_XZ + " | tar tv | head -5", TAR_XZ))),
            ("deep-first-byte", lambda: self.cold_and_warm(c, exact, self.deep(c))),
            ("ls-5000-exact", lambda: self.cold_and_warm(c, exact, self.ls(c))),
            ("ls-5000-rounded", lambda: self.cold_and_warm(c, rounded, self.ls(c)))]
        if c.has_ttl:
            out.append(("ls-5000-revalidated", lambda: self.revalidated(c, rounded)))
        for threads in self.args.threads:
            out.append((f"read-{threads}-threads",
                        lambda threads=threads: self.seq_then_rand(c, threads)))
        return out

    def cold_and_warm(self, c, server, run):
        """run(server) -> dict, once on a fresh mount (cold), once more (warm)."""
        self.fresh(c, server)
        server.clear_log()
        cold = run(server)
        server.clear_log()
        warm = run(server)
        c.umount()
        return {**{f"cold_{k}": v for k, v in cold.items()},
                **{f"warm_{k}": v for k, v in warm.items()}}

    def pipeline(self, c, cmd, fetched_file):
        def run(server):
            c.walk_to(fetched_file)
            elapsed, r = timed(cmd.format(c.path("")))
            lines = len(r.stdout.splitlines())
            if lines < 5:
                raise Failed((r.stderr.strip().splitlines() or ["no output"])[-1])
            server.settle(quiet=1.0, limit=15)
            return {"seconds": round(elapsed, 4),
                    "bytes": server.bytes_sent(fetched_file) if c.network else 0}
        return run

    @staticmethod
    def deep(c):
        def run(server):
            elapsed, r = timed(f"head -c1 {c.path(DEEP)}")
            if r.stdout != "f":
                raise Failed(r.stderr.strip() or "no byte")
            return {"seconds": round(elapsed, 4)}
        return run

    def revalidated(self, c, server):
        """`ls -l` of the rounded 5,000 once more after the listing's TTL:
        what keeping a mount fresh costs when nothing changed."""
        self.fresh(c, server, ttl=REVALIDATE_TTL)
        self.ls(c)(server)
        time.sleep(REVALIDATE_TTL + 1)
        server.settle(quiet=1.0, limit=15)
        server.clear_log()
        try:
            result = self.ls(c, timeout=REVALIDATE_LIMIT)(server)
        except subprocess.TimeoutExpired:
            raise Failed(f"ls -l did not finish in {REVALIDATE_LIMIT} s: listings "
                         f"kept {REVALIDATE_TTL} s expire while being made")
        c.umount()
        return result

    @staticmethod
    def ls(c, timeout=600):
        def run(server):
            elapsed, r = timed(f"ls -l {c.path('many')}", timeout)
            entries = len(r.stdout.splitlines()) - 1
            if entries != 5000:
                raise Failed(f"{entries} entries listed")
            server.settle(quiet=1.0, limit=15)
            return {"seconds": round(elapsed, 4), "requests": len(server.requests())}
        return run

    def readbench(self, *args, timeout=900):
        """readbench's JSON answer; its last argument limits it to the span."""
        out = subprocess.run([READBENCH, *map(str, args), str(self.span or 0)],
                             capture_output=True, text=True, timeout=timeout)
        result = json.loads(out.stdout)
        if "error" in result:
            raise Failed(result["error"])
        return result

    def rand(self, c, threads, cold, path=None):
        """4 KiB random reads; a cold run makes fewer (each one is a GET).
        Either stops after 20 s."""
        c.walk_to(BIG_TAR)
        result = self.readbench("random", path or c.path(BIG_TAR), 400 if cold else 20000,
                                threads, 20, timeout=600)
        return {"p50_us": round(result["p50_ns"] / 1000, 2),
                "p99_us": round(result["p99_ns"] / 1000, 2)}

    def seq(self, c, threads, path=None):
        c.walk_to(BIG_TAR)
        return self.readbench("seq", path or c.path(BIG_TAR), threads)["mib_per_s"]

    def seq_then_rand(self, c, threads):
        """Cold random reads on a fresh mount; then on another, a cold
        sequential read of the tar (which makes it local), then warm
        sequential and warm random reads."""
        self.fresh(c, self.site.exact)
        cold_rand = self.rand(c, threads, cold=True)
        self.fresh(c, self.site.exact)
        cold = self.seq(c, threads)
        # The cold read left the cache dirty: let writeback finish, and read
        # once unmeasured, so that the first warm figure is not slower than
        # the rest for reasons that have nothing to do with the contender.
        subprocess.run(["sync"], check=True)
        self.seq(c, threads)
        warm = self.seq(c, threads)
        warm_rand = self.rand(c, threads, cold=False)
        result = {"cold_seq_mib_s": cold, "warm_seq_mib_s": warm,
                  "cold_rand_p50_us": cold_rand["p50_us"],
                  "cold_rand_p99_us": cold_rand["p99_us"],
                  "warm_rand_p50_us": warm_rand["p50_us"],
                  "warm_rand_p99_us": warm_rand["p99_us"]}
        native = c.cache_file(BIG_TAR)
        if native:
            result.update(self.against_cache_file(c, threads, native))
        c.umount()
        return result

    def against_cache_file(self, c, threads, native, pairs=3):
        """The same reads through the mount and on the cache file, bypassing
        it, in alternation: whatever reads a file first after the warm runs
        above is a few per cent slower, mount or not, which measuring one
        after the other would charge to the second."""
        runs = [(self.seq(c, threads, native),
                 self.rand(c, threads, cold=False, path=native)["p50_us"],
                 self.seq(c, threads), self.rand(c, threads, cold=False)["p50_us"])
                for _ in range(pairs)]
        median = [statistics.median(column) for column in zip(*runs)]
        return {"native_warm_seq_mib_s": median[0], "native_warm_rand_p50_us": median[1],
                "paired_warm_seq_mib_s": median[2], "paired_warm_rand_p50_us": median[3]}

    def curl(self):
        """The network path alone: curl to /dev/null, and curl into a file on
        the caches' file system (what any cache has to do as well); over the
        same span of the tar as the read workloads."""
        size = self.span or os.path.getsize(os.path.join(self.tree_root, "pub", BIG_TAR))
        return {"cold_seq_mib_s": self.curl_speed("/dev/null", size),
                "to_file_mib_s": self.curl_speed(os.path.join(self.work, "curl-output"), size)}

    def curl_speed(self, output, size):
        drop_page_cache()
        subprocess.run(["cat", os.path.join(self.tree_root, "pub", BIG_TAR)],
                       stdout=subprocess.DEVNULL, check=True)
        cmd = ["curl", "-sf", "-o", output, self.site.url(self.site.exact, BIG_TAR)]
        cmd += ["--cacert", self.site.cacert] if self.site.cacert else []
        cmd += ["-r", f"0-{self.span - 1}"] if self.span else []
        start = time.monotonic()
        subprocess.run(cmd, check=True, timeout=900)
        elapsed = time.monotonic() - start
        if output != "/dev/null":
            os.unlink(output)
        return round(size / MIB / elapsed, 1)


class Bench:
    """The tree, the caches' file system, and the links one after another."""

    def __init__(self, args):
        self.args = args
        self.tree_root = make_tree()
        self.work, self.image = fresh_ext4()

    def run(self, save):
        """save(sections) after each link, with the links done so far."""
        sections = {}
        for link in self.args.links:
            print(f"== link {link}", flush=True)
            site = Site(self.tree_root, link)
            try:
                sections[link] = LinkRun(self.args, site, self.work, self.tree_root).run()
            finally:
                site.close()
            save(sections)
        return sections

    def close(self):
        subprocess.run(["umount", "-l", self.work])
        os.unlink(self.image)
        os.rmdir(self.work)


def environment():
    kvm = os.path.exists("/dev/kvm")
    in_guest = os.path.exists("/etc/httphsm-guest") or "hypervisor" in open("/proc/cpuinfo").read()
    return {
        "date": datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"),
        "kernel": platform.release(),
        "cpus": os.cpu_count(),
        "where": os.environ.get("HTTPHSM_BENCH_WHERE", "host"),
        "virtualised": in_guest,
        "kvm_device": kvm,
    }


def setup():
    """The peers, the plotting library and a fresh build of httphsm."""
    subprocess.run([os.path.join(REPO, "scripts", "install-deps"),
                    "httpdirfs", "rclone", "python3-matplotlib"], check=True)
    subprocess.run([os.path.join(REPO, "scripts", "build")], check=True,
                   stdout=subprocess.DEVNULL)


def comma_list(parser, text, allowed, what):
    items = [x for x in text.split(",") if x]
    for x in items:
        if x not in allowed:
            parser.error(f"unknown {what} {x} (one of {', '.join(allowed)})")
    if not items or len(set(items)) != len(items):
        parser.error(f"--{what} takes a comma list without repeats")
    return items


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--contenders", default=",".join(ALL),
                        help="comma list (default: all, in the order above)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="repetitions, in rotating order; figures are medians (default: 3)")
    parser.add_argument("--threads", default="1,4,16",
                        help="reader counts of the read workloads (default: 1,4,16)")
    parser.add_argument("--link", default=",".join(ALL_LINKS),
                        help="comma list of none, W1, W2 (default: all three)")
    parser.add_argument("--workloads", default=",".join(ALL_WORKLOADS),
                        help="comma list (default: all; read: the read-T-threads)")
    parser.add_argument("--out", help="default: bench/results/latest[-LINKS][-some]")
    parser.add_argument("--update-readme", action="store_true",
                        help="rewrite the results section of README.md")
    parser.add_argument("--no-report", action="store_true",
                        help="only write results.json (e.g. in the QEMU guest)")
    parser.add_argument("--no-setup", action="store_true",
                        help="do not install packages or build (the QEMU guest has both)")
    args = parser.parse_args()
    args.contenders = comma_list(parser, args.contenders, ALL, "contenders")
    args.links = comma_list(parser, args.link, ALL_LINKS, "link")
    args.workloads = comma_list(parser, args.workloads, ALL_WORKLOADS, "workloads")
    if args.repeat < 1:
        parser.error("--repeat takes a positive number")
    try:
        args.threads = [int(t) for t in args.threads.split(",") if t]
    except ValueError:
        parser.error("--threads takes numbers, e.g. 1,4,16")
    if not args.out:
        suffix = "" if args.links == ALL_LINKS else "-" + "-".join(args.links)
        suffix += "" if args.workloads == ALL_WORKLOADS else "-some"
        args.out = os.path.join(HERE, "results", "latest" + suffix)
    if os.geteuid() != 0:
        parser.error("run as root (mounts, drop_caches)")
    return args


def main():
    args = parse_args()
    if not args.no_setup:
        setup()
    os.makedirs(args.out, exist_ok=True)
    env = environment()

    def save(sections):
        data = {"environment": env, "repeat": args.repeat, "links": sections}
        with open(os.path.join(args.out, "results.json"), "w") as f:
            json.dump(data, f, indent=1)

    bench = Bench(args)
    try:
        bench.run(save)
    finally:
        bench.close()
    if not args.no_report:
        subprocess.run([DEBIAN_PYTHON, os.path.join(HERE, "report.py"), args.out] +
                       (["--update-readme"] if args.update_readme else []), check=True)


if __name__ == "__main__":
    main()
