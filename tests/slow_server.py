"""A real, slow HTTP server on a loopback port: it answers 200 one byte every ``interval`` seconds.

A receiver that never stalls long enough for one socket read to time out, yet takes many seconds in all: the
shape that kept outbound requests open far past their timeout. Each connection is served in a thread of its
own; the server records when each request arrived and when its connection ended (the client gave up, or the
answer was complete).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from tests.waiting import wait_until


@dataclass
class Exchange:
    """One request the slow server got: when it arrived, its head and body, and when its connection ended."""

    arrived: float
    head: bytes = b""
    body: bytes = b""
    ended: float | None = None
    sent: int = 0
    completed: bool = False


@dataclass
class SlowServer:
    """Its URL and the exchanges so far (times from ``time.monotonic``)."""

    url: str
    interval: float
    answer: bytes
    exchanges: list[Exchange] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def wait_for(self, count: int, timeout: float) -> None:
        """Wait until ``count`` requests have arrived (AssertionError after ``timeout`` seconds)."""
        arrived = wait_until(lambda: len(self.exchanges) >= count, timeout, every=0.01)
        assert arrived, f"{len(self.exchanges)} requests arrived, not {count}"


def _read_request(conn: socket.socket) -> tuple[bytes, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        if not chunk:
            return data, b""
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = conn.recv(4096)
        if not chunk:
            break
        body += chunk
    return head, body


def _serve(server: SlowServer, conn: socket.socket) -> None:
    exchange = Exchange(arrived=time.monotonic())
    with conn:
        exchange.head, exchange.body = _read_request(conn)
        with server.lock:
            server.exchanges.append(exchange)
        try:
            for byte in server.answer:
                conn.sendall(bytes([byte]))
                exchange.sent += 1
                time.sleep(server.interval)  # the slowness under test: a socket's real clock, which no test moves
            exchange.completed = True
            conn.recv(1)  # until the client closes
        except OSError:
            pass  # the client gave up: a reset or a broken pipe on the next byte
        exchange.ended = time.monotonic()


@contextmanager
def slow_server(interval: float = 0.1, body_bytes: int = 100) -> Iterator[SlowServer]:
    """Serve until the block ends: every request gets a 200 whose head and ``body_bytes``-byte body trickle out
    one byte every ``interval`` seconds."""
    body = b"x" * body_bytes
    answer = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    state = SlowServer(f"http://127.0.0.1:{listener.getsockname()[1]}/hooks/slow", interval, answer)
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(None)
            threading.Thread(target=_serve, args=(state, conn), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        stop.set()
        thread.join()
        listener.close()
