"""The HTTP cache tier a site puts between its machines and the origin, for
tests and the bench: a caching nginx (docs/nginx-cache.conf, the recipe of
docs/fleet.md) and a Squid forward proxy, both on 127.0.0.1 with their
state in a temporary directory."""
import os
import shutil
import subprocess
import tempfile

from .nginx import Nginx, free_port, stop_process, wait_listening

RECIPE = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "nginx-cache.conf")


class CachingNginx(Nginx):
    """docs/nginx-cache.conf, as shipped, caching origin_url
    (http://HOST:PORT/) on 127.0.0.1, with its own cache directory and the
    TTLs given; requests() lists what the cache was asked."""

    def __init__(self, origin_url, listing_ttl=60, file_ttl=3600):
        workdir = tempfile.mkdtemp(prefix="httphsm-cache-")
        port = free_port()
        with open(RECIPE) as f:
            recipe = f.read()
        origin = origin_url.removeprefix("http://").rstrip("/")
        for old, new in (("server cdn.kernel.org:443;", f"server {origin};"),
                         ("proxy_set_header Host cdn.kernel.org;",
                          f"proxy_set_header Host {origin};"),
                         ("https://httphsm_origin", "http://httphsm_origin"),
                         ("/var/cache/nginx/httphsm", os.path.join(workdir, "cache")),
                         ("listen 8080;", f"listen 127.0.0.1:{port};"),
                         ("proxy_cache_valid 200 60s;", f"proxy_cache_valid 200 {listing_ttl}s;"),
                         ("proxy_cache_valid 200 206 1h;",
                          f"proxy_cache_valid 200 206 {file_ttl}s;")):
            assert old in recipe, f"{RECIPE} no longer has {old!r}"
            recipe = recipe.replace(old, new)
        super().__init__(workdir, workdir=workdir, http_extra=recipe)
        self.url = f"http://127.0.0.1:{port}/"


class Squid:
    """Squid listening on http://127.0.0.1:PORT, caching what it proxies.

    credentials: (user, password) to require proxy authentication.
    """

    def __init__(self, credentials=None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.dir = tempfile.mkdtemp(prefix="httphsm-squid-")
        os.chmod(self.dir, 0o777)
        self.log_path = os.path.join(self.dir, "access.log")
        self.conf = os.path.join(self.dir, "squid.conf")
        auth = ""
        if credentials:
            passwd = os.path.join(self.dir, "passwd")
            hashed = subprocess.run(["openssl", "passwd", "-apr1", credentials[1]],
                                    capture_output=True, text=True, check=True).stdout.strip()
            with open(passwd, "w") as f:
                f.write(f"{credentials[0]}:{hashed}\n")
            os.chmod(passwd, 0o644)
            auth = f"""
auth_param basic program /usr/lib/squid/basic_ncsa_auth {passwd}
auth_param basic realm httphsm-test
acl users proxy_auth REQUIRED
http_access deny !users
"""
        with open(self.conf, "w") as f:
            f.write(f"""
http_port 127.0.0.1:{self.port}
pid_filename {self.dir}/squid.pid
cache_log {self.dir}/cache.log
logformat hsm %rm %>Hs %<st "%{{Range}}>h" %ru %Ss
access_log stdio:{self.log_path} hsm
cache_store_log none
coredump_dir {self.dir}
cache_dir ufs {self.dir}/cache 4096 16 256
cache_mem 64 MB
maximum_object_size 4 GB
maximum_object_size_in_memory 8 MB
# A range makes Squid fetch the whole object, so that it can be cached
# and every later range answered from it (the trade-off of docs/fleet.md).
range_offset_limit -1
quick_abort_min -1 KB
refresh_pattern . 0 20% 4320
acl localnet src 127.0.0.1/32
acl CONNECT method CONNECT
{auth}
http_access allow localnet
http_access deny all
shutdown_lifetime 1 second
dns_v4_first on
""")
        subprocess.run(["squid", "-z", "-N", "-f", self.conf], check=True,
                       capture_output=True, timeout=60)
        self.process = subprocess.Popen(["squid", "-N", "-f", self.conf],
                                        stderr=subprocess.PIPE)
        wait_listening(self.process, self.port, "squid", timeout=30, poll=0.1)

    def log_lines(self):
        if not os.path.exists(self.log_path):
            return []
        with open(self.log_path) as f:
            return [line.split() for line in f if line.strip()]

    def stop(self):
        stop_process(self.process, timeout=15)
        shutil.rmtree(self.dir, ignore_errors=True)
