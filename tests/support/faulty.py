"""An HTTP file server that misbehaves on request, for fault tests.

It lists directories in nginx's autoindex format (exact sizes) and serves
files with Range support, ETag and Last-Modified, unless told to:
  fail_next=N        answer the next N file requests with 503
  drop_after=B       send only B body bytes of each response, then close
  lie_length=True    promise a longer Content-Length than is sent
  ignore_range=True  answer ranges with 200 and the whole file
  bad_range=True     answer with a 206 for another range than asked
  stall=True         send headers, then nothing
  no_etag=True       send no ETag (Last-Modified only)
  stall_path=NAME    like stall, for requests of paths ending with NAME
                     only, until release() is called
  overrun=B          206s claim and send B bytes past the end of the file
                     (the Content-Range total stays right)
  surplus=B          send every body chunked, with B junk bytes after it
                     (B=-1: junk without end)
  trickle_path=NAME  send the bodies of paths ending with NAME at
                     trickle_rate bytes per second
  pages={DIR: HTML}  serve these bytes as the listing of DIR ("" is the root)
  page_cut_at=B      send listings in two writes, cut at byte B, 300 ms apart
"""
import email.utils
import html
import os
import socket
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Faults:
    def __init__(self):
        self.fail_next = 0
        self.drop_after = None
        self.lie_length = False
        self.ignore_range = False
        self.bad_range = False
        self.stall = False
        self.no_etag = False
        self.stall_path = None
        self.overrun = 0
        self.surplus = 0
        self.trickle_path = None
        self.trickle_rate = 4
        self.pages = {}
        self.page_cut_at = None
        self.released = threading.Event()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _path(self):
        rel = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
        return os.path.join(self.server.root, rel.lstrip("/"))

    def _record(self, status, sent):
        with self.server.lock:
            self.server.log.append((self.command, self.path, self.headers.get("Range"), status,
                                    sent))

    def do_HEAD(self):
        self._serve(head=True)

    def do_GET(self):
        self._serve(head=False)

    def _serve(self, head):
        path = self._path()
        if os.path.isdir(path):
            if not self.path.endswith("/"):
                self._send_simple(301, b"", {"Location": self.path + "/"})
                return
            rel = os.path.relpath(path, self.server.root).strip(".")
            page = self.server.faults.pages.get(rel) or self._listing(path)
            self._send_simple(200, page, {"Content-Type": "text/html"},
                              cut_at=self.server.faults.page_cut_at)
            return
        if not os.path.isfile(path):
            self._send_simple(404, b"not found")
            return
        faults = self.server.faults
        with self.server.lock:
            failing = faults.fail_next > 0
            if failing:
                faults.fail_next -= 1
        if failing:
            self._send_simple(503, b"try later")
            return
        with open(path, "rb") as f:
            data = f.read()
        st = os.stat(path)
        etag = f'"{st.st_mtime_ns:x}-{st.st_size:x}"'
        start, end, status = 0, len(data), 200
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes=") and not faults.ignore_range:
            first, _, last = rng[6:].partition("-")
            start = int(first)
            end = min(int(last) + 1 if last else len(data), len(data))
            if start >= len(data):
                self._send_simple(416, b"", {"Content-Range": f"bytes */{len(data)}"})
                return
            status = 206
            if faults.bad_range:
                start, end = start + 4096, min(end + 4096, len(data))
        body = data[start:end]
        if status == 206 and faults.overrun:
            body += b"\xee" * faults.overrun
            end += faults.overrun
        self.send_response(status)
        if not faults.no_etag:
            self.send_header("ETag", etag)
        self.send_header("Last-Modified", email.utils.formatdate(st.st_mtime, usegmt=True))
        self.send_header("Accept-Ranges", "bytes")
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(data)}")
        if faults.surplus:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length",
                             str(len(body) + (1000 if faults.lie_length else 0)))
        self.end_headers()
        if head:
            self._record(status, 0)
            return
        if faults.surplus:
            self._send_chunked(body, faults.surplus)
            return
        if faults.trickle_path and self.path.endswith(faults.trickle_path):
            self._trickle(body, faults.trickle_rate)
            return
        if faults.stall:
            time.sleep(3600)
        if faults.stall_path and self.path.endswith(faults.stall_path):
            faults.released.wait(600)
        if faults.drop_after is not None:
            body = body[:faults.drop_after]
        try:
            self.wfile.write(body)
            self.wfile.flush()
        except OSError:
            pass
        self._record(status, len(body))
        if faults.drop_after is not None or faults.lie_length:
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True

    def _send_chunked(self, body, surplus):
        sent = 0
        try:
            for pos in range(0, len(body), 65536):
                piece = body[pos:pos + 65536]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                sent += len(piece)
            junk = b"\xee" * 65536
            while surplus < 0 or sent < len(body) + surplus:
                piece = junk[:65536 if surplus < 0 else len(body) + surplus - sent]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                sent += len(piece)
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            self.close_connection = True
        self._record(200, sent)

    def _trickle(self, body, rate):
        sent = 0
        try:
            while sent < len(body):
                self.wfile.write(body[sent:sent + 1])
                self.wfile.flush()
                sent += 1
                time.sleep(1 / rate)
        except OSError:
            self.close_connection = True
        self._record(206, sent)

    def _send_simple(self, status, body, headers=None, cut_at=None):
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            if cut_at:
                self.wfile.write(body[:cut_at])
                self.wfile.flush()
                time.sleep(0.3)
                body = body[cut_at:]
            self.wfile.write(body)
        self._record(status, len(body))

    def _listing(self, path):
        lines = ['<html><head><title>Index</title></head><body><pre><a href="../">../</a>']
        for name in sorted(os.listdir(path)):
            full = os.path.join(path, name)
            st = os.stat(full)
            is_dir = os.path.isdir(full)
            href = urllib.parse.quote(name) + ("/" if is_dir else "")
            date = time.strftime("%d-%b-%Y %H:%M", time.gmtime(st.st_mtime))
            size = "-" if is_dir else str(st.st_size)
            lines.append(f'<a href="{href}">{html.escape(name)}</a>   {date}   {size}')
        lines.append("</pre></body></html>")
        return "\n".join(lines).encode()


class FaultyServer:
    def __init__(self, root):
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.root = root
        self.httpd.faults = Faults()
        self.httpd.lock = threading.Lock()
        self.httpd.log = []
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def faults(self):
        return self.httpd.faults

    def release(self):
        """Lets the requests held by stall_path go on."""
        self.httpd.faults.released.set()

    def reset(self):
        self.httpd.faults.released.set()
        self.httpd.faults = Faults()
        with self.httpd.lock:
            self.httpd.log.clear()

    def requests(self, suffix=""):
        with self.httpd.lock:
            return [r for r in self.httpd.log if r[1].endswith(suffix)]

    def stop(self):
        self.httpd.faults.released.set()
        self.httpd.shutdown()
        self.httpd.server_close()
