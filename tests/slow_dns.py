"""A real, slow DNS server on a loopback UDP port, and a system resolver that asks it for one test domain.

``socket.getaddrinfo`` asks the resolver ``/etc/resolv.conf`` names, which a test cannot change; so
:func:`slow_resolver` puts, for the time of a ``with``, a ``socket.getaddrinfo`` in its place that sends a real
DNS query over UDP to the slow server for names under :data:`DOMAIN` and waits for the answer (as the C
library's stub resolver does), and hands every other name to the real one. The server answers every A query
with 127.0.0.1 after ``delay`` seconds: the shape of a resolver that took 9.9 s against a 5 s timeout.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

#: Names under this domain are resolved by the slow server.
DOMAIN = ".slow-dns.test"
_A, _IN = 1, 1


def _question(data: bytes) -> tuple[bytes, int]:
    """The question section of a DNS message (after its 12-byte header) and where it ends."""
    end = 12
    while data[end]:
        end += 1 + data[end]
    end += 1 + 4  # the root label, QTYPE and QCLASS
    return data[12:end], end


def _answer(query: bytes) -> bytes:
    question, _ = _question(query)
    header = query[:2] + struct.pack("!HHHHH", 0x8180, 1, 1, 0, 0)  # a response, recursion available, no error
    record = b"\xc0\x0c" + struct.pack("!HHIH", _A, _IN, 60, 4) + socket.inet_aton("127.0.0.1")
    return header + question + record


def _serve(sock: socket.socket, delay: float, stop: threading.Event) -> None:
    sock.settimeout(0.05)
    while not stop.is_set():
        try:
            query, peer = sock.recvfrom(512)
        except TimeoutError:
            continue
        except OSError:
            return
        # Each answer in its own timer, so one slow answer does not hold up the next query.
        timer = threading.Timer(delay, lambda q=query, p=peer: _reply(sock, q, p))
        timer.daemon = True
        timer.start()


def _reply(sock: socket.socket, query: bytes, peer: Any) -> None:
    with contextlib.suppress(OSError):  # the server was closed meanwhile
        sock.sendto(_answer(query), peer)


def query_a(name: str, server: tuple[str, int], timeout: float) -> list[str]:
    """The IPv4 addresses ``server`` gives for ``name`` (one DNS query over UDP, as a stub resolver sends)."""
    ident = 0x5151
    labels = b"".join(bytes([len(part)]) + part.encode() for part in name.rstrip(".").split("."))
    query = struct.pack("!HHHHHH", ident, 0x0100, 1, 0, 0, 0) + labels + b"\0" + struct.pack("!HH", _A, _IN)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(timeout)
        sock.sendto(query, server)
        data, _ = sock.recvfrom(512)
    count = struct.unpack("!H", data[6:8])[0]
    _, at = _question(data)
    addresses = []
    for _ in range(count):
        at += 2  # a compressed name pointer
        kind, _klass, _ttl, length = struct.unpack("!HHIH", data[at : at + 10])
        at += 10
        if kind == _A:
            addresses.append(socket.inet_ntoa(data[at : at + length]))
        at += length
    return addresses


@contextmanager
def slow_resolver(monkeypatch: pytest.MonkeyPatch, delay: float) -> Iterator[tuple[str, int]]:
    """For the ``with``'s time, names under :data:`DOMAIN` resolve through a DNS server on loopback answering
    after ``delay`` seconds; the server's address."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    server = sock.getsockname()
    stop = threading.Event()
    thread = threading.Thread(target=_serve, args=(sock, delay, stop), daemon=True)
    thread.start()
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
        if not isinstance(host, str) or not host.endswith(DOMAIN):
            return real(host, port, *args, **kwargs)
        try:
            addresses = query_a(host, server, timeout=delay + 5)
        except OSError as exc:
            raise socket.gaierror(socket.EAI_AGAIN, f"no answer from the DNS server: {exc}") from exc
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in addresses]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    try:
        yield server
    finally:
        monkeypatch.setattr(socket, "getaddrinfo", real)
        stop.set()
        thread.join(1)
        sock.close()
