"""HTTP requests to URLs that operators enter (webhooks, allow and deny list feeds): the SSRF guard.

The URL's host is resolved once; every address it resolves to must be public (not loopback, private,
link-local, multicast or reserved) unless the caller's setting allows private addresses, and the connection
goes to the address checked (its TLS still verifies the host name), so a DNS answer that changes between the
check and the connection cannot lead elsewhere. Redirects are not followed: the caller sees the 3xx.

Each app keeps its own settings (``QUOTAS['NOTIFICATIONS']``, ``QUOTAS['ACL_FEEDS']``) and passes them in;
this module reads none.
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit


class Refused(Exception):
    """A URL the caller's settings do not allow (scheme or address): not requested, not worth retrying."""


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


def check_url(url: str, *, allow_http: bool, allow_private: bool) -> Target:
    """Where ``url`` leads, once its scheme and every address it resolves to are allowed; raises
    :class:`Refused` naming why not."""
    parts = urlsplit(url)
    allowed = ("https", "http") if allow_http else ("https",)
    if parts.scheme not in allowed or not parts.hostname:
        raise Refused(f"only {' and '.join(s + '://' for s in allowed)} URLs are allowed")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:  # a port out of range or not a number
        raise Refused(f"the URL's port is not valid: {exc}") from exc
    try:
        infos = socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise Refused(f"{parts.hostname} does not resolve: {exc}") from exc
    addresses = [str(info[4][0]) for info in infos]
    if not allow_private:
        internal = [a for a in addresses if not ipaddress.ip_address(a.split("%")[0]).is_global]
        if internal:
            raise Refused(f"{parts.hostname} resolves to an internal address ({internal[0]})")
    return Target(parts.scheme, parts.hostname, port, addresses[0])


class _Pinned(http.client.HTTPSConnection):
    """An HTTPS connection to an address checked beforehand, verifying the certificate of the URL's host."""

    def __init__(self, host: str, port: int, address: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout, context=ssl.create_default_context())
        self._address = address

    def connect(self) -> None:
        sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)  # type: ignore[attr-defined]


@dataclass(frozen=True, slots=True)
class Policy:
    """What a caller allows: plain ``http://``, private addresses, how long (seconds) and how much (bytes)."""

    allow_http: bool
    allow_private: bool
    timeout: float
    limit: int


def request(
    method: str, url: str, policy: Policy, *, body: bytes | None = None, headers: dict[str, str] | None = None
) -> Answer:
    """Send one request to ``url`` as ``policy`` allows; the answer, its body read up to ``policy.limit`` bytes.

    Raises :class:`Refused` for a URL not allowed and ``OSError`` (timeouts included) or
    ``http.client.HTTPException`` when the exchange fails.
    """
    target = check_url(url, allow_http=policy.allow_http, allow_private=policy.allow_private)
    parts = urlsplit(url)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    connection: http.client.HTTPConnection = (
        _Pinned(target.host, target.port, target.address, policy.timeout)
        if target.scheme == "https"
        else http.client.HTTPConnection(target.address, target.port, policy.timeout)
    )
    try:
        connection.request(
            method, path, body=body, headers={"Host": parts.netloc.rpartition("@")[2], **(headers or {})}
        )
        response = connection.getresponse()
        data = response.read(policy.limit + 1)  # one byte more says whether there was more
        return Answer(response.status, data[: policy.limit], len(data) > policy.limit)
    finally:
        connection.close()
