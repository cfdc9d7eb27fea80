#!/usr/bin/python3
"""An emulated WAN link: a TCP relay on 127.0.0.1 in front of an origin.

    wanlink.py --to 127.0.0.1:8443 --rtt-ms 50 --rate-mbit 100 [--port N]

prints "PORT" once it listens, then relays until killed.  The model, per
direction (client to origin, origin to client), shared by all connections:

- a link of the given rate: bytes leave in the order they came, one chunk
  after another, each taking len / rate on the wire;
- then half the RTT of propagation delay before they are delivered;
- a bounded queue in front of the link (QUEUE_SECONDS of link time, as a
  router's buffer): while it is full the relay reads no more from the
  sender, so TCP's own flow control pushes back, as it would on a real
  bottleneck.

A new connection costs one RTT before its first bytes move (the TCP
handshake).  connect() itself completes at once on loopback, so the relay
charges that RTT to the client's first bytes instead: a fresh connection's
first response arrives after 2 RTT (plain HTTP), 3 RTT with TLS 1.3, as on
a real path.  Used by tests (WanLink) and bench/run.py.
"""
import argparse
import asyncio
import os
import signal
import socket
import subprocess
import sys

CHUNK = 64 * 1024
QUEUE_SECONDS = 0.02
# Settings named in the project's issues.
LINKS = {"W1": (50.0, 100.0), "W2": (10.0, 1000.0)}


class Link:
    """One direction: a serialising link with a bounded queue, then delay."""

    def __init__(self, rate_bytes, delay):
        self.rate = rate_bytes
        self.delay = delay
        self.free_at = 0.0  # when the wire is idle again (loop time)

    async def admit(self, loop):
        """Waits while the queue in front of the wire is full."""
        backlog = self.free_at - loop.time()
        if backlog > QUEUE_SECONDS:
            await asyncio.sleep(backlog - QUEUE_SECONDS)

    def send(self, loop, size):
        """Puts size bytes on the wire; returns when they arrive."""
        start = max(loop.time(), self.free_at)
        self.free_at = start + size / self.rate
        return self.free_at + self.delay


async def pump(loop, link, reader, writer, not_before, abort):
    """Relays one direction of one connection through link; an end of
    stream is passed on (half-close), an error aborts the connection."""
    deliveries = asyncio.Queue()

    async def deliver():
        while True:
            at, data = await deliveries.get()
            if at > loop.time():
                await asyncio.sleep(at - loop.time())
            if data is None:
                break
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()

    delivering = asyncio.ensure_future(deliver())
    try:
        while True:
            await link.admit(loop)
            data = await reader.read(CHUNK)
            at = link.send(loop, len(data)) if data else loop.time() + link.delay
            deliveries.put_nowait((max(at, not_before), data or None))
            if not data:
                break
        await delivering
    except (ConnectionError, OSError):
        delivering.cancel()
        abort()


class Relay:
    def __init__(self, origin, rtt, rate_bytes):
        self.origin = origin
        self.rtt = rtt
        self.up = Link(rate_bytes, rtt / 2)
        self.down = Link(rate_bytes, rtt / 2)

    async def handle(self, client_reader, client_writer):
        loop = asyncio.get_running_loop()
        # The handshake's round trip, charged to the client's first bytes:
        # they leave once it is done and arrive half a round trip later.
        handshake_done = loop.time() + self.rtt
        try:
            origin_reader, origin_writer = await asyncio.open_connection(*self.origin)
        except OSError:
            client_writer.close()
            return
        writers = (client_writer, origin_writer)

        def abort():
            for w in writers:
                w.transport.abort()

        for w in writers:
            w.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        await asyncio.gather(
            pump(loop, self.up, client_reader, origin_writer, handshake_done + self.up.delay,
                 abort),
            pump(loop, self.down, origin_reader, client_writer, 0, abort),
            return_exceptions=True)
        for w in writers:
            w.close()


async def serve(origin, rtt, rate_bytes, port):
    relay = Relay(origin, rtt, rate_bytes)
    server = await asyncio.start_server(relay.handle, "127.0.0.1", port, backlog=256)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


class WanLink:
    """The relay as a subprocess: WanLink("127.0.0.1", 8443, "W1").url_port."""

    def __init__(self, host, port, link="W1", rtt_ms=None, rate_mbit=None):
        rtt_ms, rate_mbit = (rtt_ms, rate_mbit) if rtt_ms else LINKS[link]
        self.rtt = rtt_ms / 1000
        self.rate_mbit = rate_mbit
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--to", f"{host}:{port}",
             "--rtt-ms", str(rtt_ms), "--rate-mbit", str(rate_mbit)],
            stdout=subprocess.PIPE, text=True)
        self.port = int(self.proc.stdout.readline())

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=10)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--to", required=True, help="origin HOST:PORT")
    parser.add_argument("--rtt-ms", type=float, required=True)
    parser.add_argument("--rate-mbit", type=float, required=True)
    parser.add_argument("--port", type=int, default=0, help="listen port (default: any)")
    args = parser.parse_args()
    host, port = args.to.rsplit(":", 1)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    asyncio.run(serve((host, int(port)), args.rtt_ms / 1000, args.rate_mbit * 1e6 / 8,
                      args.port))


if __name__ == "__main__":
    main()
