"""A TCP proxy in front of a redis-server that can lose a reply: Redis runs the command, the client never hears.

Armed with a marker (``proxy.arm(b"adjust")``), the next command whose bytes hold it is forwarded to Redis, and
the client's connection is cut when Redis answers, before the answer reaches it: what a timeout after the
command ran looks like to the client. Every other byte goes through untouched, on real sockets. Set ``down``
and Redis is away behind it: every connection is cut before a command reaches Redis, and new ones are closed
as they come, until ``down`` is cleared.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from dataclasses import dataclass, field


@dataclass
class ReplyLosingProxy:
    """Forwards 127.0.0.1:``port`` to the redis-server on ``upstream`` (see the module docstring)."""

    upstream: int
    port: int = 0
    cuts: int = 0  # replies lost so far
    down: bool = False  # Redis away: no command reaches it
    _marker: bytes | None = None
    _listener: socket.socket | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> ReplyLosingProxy:
        listener = socket.create_server(("127.0.0.1", self.port))
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, daemon=True, name="lost-replies").start()
        return self

    def arm(self, marker: bytes) -> None:
        """Lose the reply of the next command holding ``marker``."""
        with self._lock:
            self._marker = marker

    def disarm(self) -> None:
        """Lose no reply (a marker no command held is forgotten)."""
        with self._lock:
            self._marker = None

    def stop(self) -> None:
        if self._listener is not None:
            self._listener.close()

    def _accept(self) -> None:
        assert self._listener is not None
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # stopped
            if self.down:
                client.close()
                continue
            server = socket.create_connection(("127.0.0.1", self.upstream))
            cut = threading.Event()
            threading.Thread(target=self._requests, args=(client, server, cut), daemon=True).start()
            threading.Thread(target=self._replies, args=(server, client, cut), daemon=True).start()

    def _requests(self, client: socket.socket, server: socket.socket, cut: threading.Event) -> None:
        try:
            while data := client.recv(65536):
                if self.down:
                    break  # the command never reaches Redis
                with self._lock:
                    if self._marker is not None and self._marker in data:
                        self._marker = None
                        cut.set()  # before Redis can answer
                server.sendall(data)
        except OSError:
            pass
        _close(client, server)

    def _replies(self, server: socket.socket, client: socket.socket, cut: threading.Event) -> None:
        try:
            while data := server.recv(65536):
                if cut.is_set():
                    with self._lock:
                        self.cuts += 1
                    break  # Redis ran it and answered; the client never hears
                client.sendall(data)
        except OSError:
            pass
        _close(client, server)


def _close(*sockets: socket.socket) -> None:
    for sock in sockets:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()
