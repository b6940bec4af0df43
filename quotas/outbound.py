"""HTTP requests to URLs that operators enter (webhooks, allow and deny list feeds): the SSRF guard.

The URL's host is resolved once; every address it resolves to must be public (in none of the special-purpose
blocks of :mod:`quotas.formats.special_addresses`: loopback, private, link-local, site-local, multicast, reserved,
documentation, ...; nor such an IPv4 address embedded in an IPv6 form: NAT64, IPv4-compatible, 6to4, Teredo)
unless the caller's setting allows private addresses, and the connection goes to the address checked (its TLS
still verifies the host name), so a DNS answer that changes between the check and the connection cannot lead
elsewhere. Redirects are not followed: the caller sees the 3xx.

Each request has one deadline, ``Policy.timeout`` seconds from the host's resolution to the answer's last byte
(DNS, connecting, TLS handshake, sending and every read included): a server that trickles its answer a byte at a
time is cut off there, not after one timeout per read, and a resolver that is slow to answer is waited for only
until then (:class:`_Lookups`). Checking a URL alone (:func:`check_url`, when it is saved) is bounded the same way.

Each app keeps its own settings (``QUOTAS['NOTIFICATIONS']``, ``QUOTAS['ACL_FEEDS']``) and passes them in;
this module reads none.
"""

from __future__ import annotations

import http.client
import io
import ipaddress
import os
import queue
import socket
import ssl
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from quotas.formats.special_addresses import special_block

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

#: NAT64's well-known prefix (RFC 6052): the last 32 bits are the IPv4 address the translator connects to.
NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
#: IPv4-compatible addresses (``::a.b.c.d``, deprecated by RFC 4291), ``::`` and ``::1`` aside.
IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")
#: Lookups waiting for an answer at once, in this process (see :class:`_Lookups`).
LOOKUP_THREADS = 8


class Refused(Exception):
    """A URL the caller's settings do not allow: not requested, not worth retrying.

    ``kind`` is ``"url"`` (its scheme or port) or ``"address"`` (its host does not resolve, or resolves to an
    internal address: one kind for both, so that whoever sees only the kind cannot tell which names resolve
    inside the platform's network)."""

    def __init__(self, message: str, kind: Literal["url", "address"] = "url") -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True, slots=True)
class Target:
    """Where a checked URL leads: its scheme, host name, port and the one address to connect to."""

    scheme: str
    host: str
    port: int
    address: str


@dataclass(frozen=True, slots=True)
class Answer:
    """What a server answered: its status, at most ``limit`` bytes of its body, and whether there was more."""

    status: int
    body: bytes
    truncated: bool


def check_url(url: str, *, allow_http: bool, allow_private: bool, timeout: float | Deadline) -> Target:
    """Where ``url`` leads, once its scheme and every address it resolves to are allowed; raises
    :class:`Refused` naming why not, and ``TimeoutError`` when the host's resolution outlasts ``timeout`` (seconds,
    or the request's :class:`Deadline`)."""
    deadline = timeout if isinstance(timeout, Deadline) else Deadline(timeout)
    parts = urlsplit(url)
    allowed = ("https", "http") if allow_http else ("https",)
    if parts.scheme not in allowed or not parts.hostname:
        raise Refused(f"only {' and '.join(s + '://' for s in allowed)} URLs are allowed")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:  # a port out of range or not a number
        raise Refused(f"the URL's port is not valid: {exc}") from exc
    addresses = resolve(parts.hostname, port, deadline)
    if not allow_private:
        internal = [a for a in addresses if is_internal(ipaddress.ip_address(a.split("%")[0]))]
        if internal:
            raise Refused(f"{parts.hostname} resolves to an internal address ({internal[0]})", "address")
    return Target(parts.scheme, parts.hostname, port, addresses[0])


def resolve(host: str, port: int, deadline: Deadline) -> list[str]:
    """The addresses ``host`` resolves to (``socket.getaddrinfo``), waited for until ``deadline``; raises
    :class:`Refused` (``"address"``) when it does not resolve and ``TimeoutError`` at the deadline."""
    future = _lookups.submit(host, port)
    try:
        return future.result(timeout=deadline.remaining())
    except TimeoutError:  # the deadline (concurrent.futures' TimeoutError is the builtin since Python 3.11)
        future.cancel()  # dropped unrun if no thread took it yet
        raise TimeoutError(f"{host} did not resolve within {deadline.seconds:g} s") from None
    except OSError as exc:
        raise Refused(f"{host} does not resolve: {exc}", "address") from exc


class _Lookups:
    """Host name lookups, run by at most ``size`` daemon threads so that their callers stop waiting at a deadline.

    ``socket.getaddrinfo`` takes no timeout and cannot be interrupted: the thread calling it waits for the
    system's resolver however long that takes (9.9 s was seen against a 5 s timeout). So the lookup runs in a
    worker thread, and the caller waits for its answer only until its deadline. Not a thread per lookup: a
    resolver that hangs would leave one stuck thread per request, without bound. Not ``ThreadPoolExecutor``: its
    threads are joined when the interpreter exits, so one stuck lookup would hold up a worker's shutdown. Here a
    hung resolver holds at most ``size`` daemon threads; lookups beyond them wait in the queue, their callers give
    up at their own deadlines, and a lookup whose caller gave up is dropped unrun.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._reset()
        os.register_at_fork(after_in_child=self._reset)  # a forked child has none of its parent's threads

    def _reset(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Future[list[str]], str, int]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0  # threads not running a lookup
        self._queued = 0  # lookups no thread has taken yet

    def submit(self, host: str, port: int) -> Future[list[str]]:
        """The future addresses of ``host`` (a ``socket.getaddrinfo`` for TCP connections to ``port``)."""
        future: Future[list[str]] = Future()
        with self._lock:
            self._jobs.put((future, host, port))
            self._queued += 1
            if self._queued > self._idle and self._threads < self.size:
                self._threads += 1
                self._idle += 1
                threading.Thread(target=self._work, name="outbound-lookup", daemon=True).start()
        return future

    def _work(self) -> None:
        while True:
            future, host, port = self._jobs.get()
            with self._lock:
                self._queued -= 1
                self._idle -= 1
            if future.set_running_or_notify_cancel():  # False: its caller gave up before it began
                try:
                    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
                except BaseException as exc:  # handed to the caller, as concurrent.futures does
                    future.set_exception(exc)
                else:
                    future.set_result([str(info[4][0]) for info in infos])
            with self._lock:
                self._idle += 1


_lookups = _Lookups(LOOKUP_THREADS)


def embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address leads to through a translation or tunnel: IPv4-mapped, NAT64
    (``64:ff9b::/96``), IPv4-compatible, 6to4 (``2002::/16``) and Teredo (``2001::/32``: its server and client)."""
    if address.ipv4_mapped is not None:
        return [address.ipv4_mapped]
    if address in NAT64 or (address in IPV4_COMPATIBLE and int(address) > 1):
        return [ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)]
    if address.sixtofour is not None:
        return [address.sixtofour]
    if address.teredo is not None:
        return list(address.teredo)
    return []


def is_internal(address: IPAddress) -> bool:
    """Whether ``address`` leads inside: in a special-purpose block that is not globally reachable
    (:mod:`quotas.formats.special_addresses`, IANA's registries), not global in ``ipaddress``'s view, or an IPv6
    form of an IPv4 address that is not global."""
    if special_block(address) is not None:
        return True
    if isinstance(address, ipaddress.IPv6Address):
        embedded = embedded_ipv4(address)
        if embedded:
            # Decided by where it leads: Python's own view of these prefixes changes between versions (3.13
            # calls all of 6to4's 2002::/16 and Teredo's 2001::/32 private, 3.11 global).
            return any(special_block(v4) is not None or not v4.is_global for v4 in embedded)
    return not address.is_global


class Deadline:
    """A moment (``time.monotonic``) by which the whole request must be done."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds

    def remaining(self) -> float:
        """Seconds left; raises ``TimeoutError`` once there are none."""
        left = self.at - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"the request passed its deadline ({self.seconds:g} s)")
        return left


class _DeadlineReader(io.RawIOBase):
    """The socket's bytes, each read allowed only the time left before the deadline (a socket timeout alone
    bounds one read, which a server sending a byte at a time never exceeds)."""

    def __init__(self, owner: _DeadlineSocket) -> None:
        super().__init__()
        self._owner = owner

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        sock, deadline = self._owner.sock, self._owner.deadline
        sock.settimeout(deadline.remaining())
        try:
            return sock.recv_into(buffer)
        except TimeoutError as exc:
            raise TimeoutError(f"the request passed its deadline ({deadline.seconds:g} s)") from exc

    def close(self) -> None:
        if not self.closed:
            super().close()
            self._owner.release()


class _DeadlineSocket:
    """A connected socket as ``http.client`` uses it (``sendall``, ``makefile``, ``close``), every operation
    ending by the deadline."""

    def __init__(self, sock: socket.socket, deadline: Deadline) -> None:
        self.sock = sock
        self.deadline = deadline
        self._readers = 0
        self._closing = False

    def sendall(self, data: bytes) -> None:
        self.sock.settimeout(self.deadline.remaining())  # sendall's timeout bounds the whole call
        self.sock.sendall(data)

    def makefile(self, mode: str) -> io.BufferedReader:
        self._readers += 1
        return io.BufferedReader(_DeadlineReader(self))

    def close(self) -> None:
        # As socket.socket does for its makefile(): http.client closes the connection once the response holds
        # the socket (an answer without keep-alive), and the response still reads its body from it.
        self._closing = True
        if not self._readers:
            self.sock.close()

    def release(self) -> None:
        """A reader was closed: the socket closes with the last one once :meth:`close` was called."""
        self._readers -= 1
        if self._closing and not self._readers:
            self.sock.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sock, name)


def _connect(address: str, port: int, deadline: Deadline) -> socket.socket:
    return socket.create_connection((address, port), deadline.remaining())


class _Plain(http.client.HTTPConnection):
    """A plain HTTP connection to an address checked beforehand, within a deadline."""

    def __init__(self, address: str, port: int, deadline: Deadline) -> None:
        super().__init__(address, port, timeout=deadline.seconds)
        self._deadline = deadline

    def connect(self) -> None:
        self.sock = _DeadlineSocket(_connect(self.host, self.port, self._deadline), self._deadline)


class _Pinned(http.client.HTTPSConnection):
    """An HTTPS connection to an address checked beforehand, verifying the certificate of the URL's host,
    within a deadline (the TLS handshake included)."""

    def __init__(self, host: str, port: int, address: str, deadline: Deadline) -> None:
        super().__init__(host, port, timeout=deadline.seconds, context=ssl.create_default_context())
        self._address = address
        self._deadline = deadline

    def connect(self) -> None:
        sock = _connect(self._address, self.port, self._deadline)
        sock.settimeout(self._deadline.remaining())  # the handshake's reads and writes, in all
        tls = self._context.wrap_socket(sock, server_hostname=self.host)  # type: ignore[attr-defined]
        self.sock = _DeadlineSocket(tls, self._deadline)


@dataclass(frozen=True, slots=True)
class Policy:
    """What a caller allows: plain ``http://``, private addresses, how long the whole request may take (seconds,
    from resolving the host to the answer's last byte) and how much of the answer is read (bytes)."""

    allow_http: bool
    allow_private: bool
    timeout: float
    limit: int


def request(
    method: str, url: str, policy: Policy, *, body: bytes | None = None, headers: dict[str, str] | None = None
) -> Answer:
    """Send one request to ``url`` as ``policy`` allows; the answer, its body read up to ``policy.limit`` bytes.

    Raises :class:`Refused` for a URL not allowed and ``OSError`` (``TimeoutError`` once ``policy.timeout``
    seconds passed since connecting, ``ssl.SSLError`` for TLS) or ``http.client.HTTPException`` when the
    exchange fails. The deadline starts before the host is resolved: a slow resolver counts against it.
    """
    deadline = Deadline(policy.timeout)
    target = check_url(url, allow_http=policy.allow_http, allow_private=policy.allow_private, timeout=deadline)
    parts = urlsplit(url)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    connection: http.client.HTTPConnection = (
        _Pinned(target.host, target.port, target.address, deadline)
        if target.scheme == "https"
        else _Plain(target.address, target.port, deadline)
    )
    try:
        connection.request(
            method, path, body=body, headers={"Host": parts.netloc.rpartition("@")[2], **(headers or {})}
        )
        with connection.getresponse() as response:
            data = response.read(policy.limit + 1)  # one byte more says whether there was more
        return Answer(response.status, data[: policy.limit], len(data) > policy.limit)
    finally:
        connection.close()
