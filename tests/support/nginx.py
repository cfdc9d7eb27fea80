"""A real nginx on 127.0.0.1 serving a directory with autoindex, and its
access log, for tests, the demo and the benchmarks."""
import os
import shutil
import socket
import subprocess
import tempfile
import time

LOG_FORMAT = '$request_method $status $body_bytes_sent "$http_range" "$request_uri" $connection $server_protocol'


def wait_listening(process, port, name, timeout, poll=0.05):
    """Returns once something accepts connections on 127.0.0.1:port; raises
    if process (a server started for it) exits first or time runs out."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{name} failed: " + process.stderr.read().decode())
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(poll)
    raise RuntimeError(f"{name} did not start listening")


def stop_process(process, timeout):
    """SIGTERM, then SIGKILL after timeout seconds."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Request:
    def __init__(self, line):
        line, connection, self.protocol = line.rsplit(" ", 2)
        method, status, sent, rest = line.split(" ", 3)
        range_part, uri = rest.rsplit(" ", 1)
        self.connection = int(connection)
        self.method = method
        self.status = int(status)
        self.bytes = int(sent)
        self.range = range_part.strip('"')
        self.uri = uri.strip('"')

    def __repr__(self):
        return f"{self.method} {self.uri} [{self.range}] {self.status} {self.bytes}"


class Nginx:
    """nginx serving root at http://127.0.0.1:PORT/ (autoindex on).

    exact_size=False is kernel.org's configuration (sizes rounded, "1.2M").
    extra is spliced into the server block (e.g. locations returning errors).
    """

    def __init__(self, root, exact_size=True, extra="", workdir=None, tls=None, http_extra=""):
        """tls: (certificate, key) paths to serve HTTPS (with HTTP/2);
        http_extra is spliced into the http block (e.g. proxy_cache_path)."""
        self.root = root
        self.port = free_port()
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}/"
        listen = f"listen 127.0.0.1:{self.port}" + (" ssl http2;" if tls else ";")
        if tls:
            listen += f" ssl_certificate {tls[0]}; ssl_certificate_key {tls[1]};"
        self.dir = workdir or tempfile.mkdtemp(prefix="httphsm-nginx-")
        os.chmod(self.dir, 0o755)
        self.log_path = os.path.join(self.dir, "access.log")
        self.conf = os.path.join(self.dir, "nginx.conf")
        with open(self.conf, "w") as f:
            f.write(f"""
daemon off;
master_process on;
{"user root root;" if os.geteuid() == 0 else ""}
worker_processes 2;
pid {self.dir}/nginx.pid;
error_log {self.dir}/error.log;
events {{ worker_connections 1024; }}
http {{
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    log_format hsm '{LOG_FORMAT}';
    access_log {self.log_path} hsm;
    sendfile on;
    keepalive_requests 100000;
    client_body_temp_path {self.dir}/tmp;
    proxy_temp_path {self.dir}/tmp;
    fastcgi_temp_path {self.dir}/tmp;
    uwsgi_temp_path {self.dir}/tmp;
    scgi_temp_path {self.dir}/tmp;
    {http_extra}
    server {{
        {listen}
        root {root};
        autoindex on;
        autoindex_exact_size {"on" if exact_size else "off"};
        {extra}
    }}
}}
""")
        self.process = subprocess.Popen(["nginx", "-c", self.conf, "-p", self.dir],
                                        stderr=subprocess.PIPE)
        wait_listening(self.process, self.port, "nginx", timeout=10)

    def requests(self):
        """Every request logged so far (nginx writes the log line at once)."""
        if not os.path.exists(self.log_path):
            return []
        with open(self.log_path) as f:
            return [Request(line.rstrip("\n")) for line in f if line.strip()]

    def clear_log(self):
        open(self.log_path, "w").close()

    def settle(self, quiet=0.3, limit=10):
        """Waits until the log has not grown for quiet seconds: nginx logs a
        request when it ends, which may be after the client has its bytes."""
        deadline = time.time() + limit
        size, since = -1, time.time()
        while time.time() < deadline:
            now = os.path.getsize(self.log_path) if os.path.exists(self.log_path) else 0
            if now != size:
                size, since = now, time.time()
            elif time.time() - since >= quiet:
                return
            time.sleep(0.05)

    def bytes_sent(self, uri_suffix=None):
        return sum(r.bytes for r in self.requests()
                   if uri_suffix is None or r.uri.endswith(uri_suffix))

    def stop(self):
        stop_process(self.process, timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)
