"""POSTing a webhook: only to public addresses (SSRF), within a timeout, reading a bounded answer.

The URL's host is resolved once; every address it resolves to must be public (not loopback, private,
link-local, multicast or reserved) unless ``QUOTAS['NOTIFICATIONS']['ALLOW_PRIVATE_ADDRESSES']``, and the
connection goes to the address checked (its TLS still verifies the host name), so a DNS answer that changes
between the check and the connection cannot lead elsewhere. Redirects are not followed: a 3xx is a failure.
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

from .conf import notification_settings

USER_AGENT = "quota-platform-webhooks/1"


class Refused(Exception):
    """A URL the settings do not allow (scheme or address): not sent, and not worth retrying."""


@dataclass(frozen=True, slots=True)
class Answer:
    """What a receiver answered."""

    status: int
    body: str


def check_url(url: str) -> tuple[str, str, int, str]:
    """``(scheme, host, port, address)`` of ``url`` once its scheme and every address it resolves to are
    allowed; raises :class:`Refused` naming why not."""
    parts = urlsplit(url)
    allowed = ("https", "http") if notification_settings.ALLOW_HTTP else ("https",)
    if parts.scheme not in allowed or not parts.hostname:
        raise Refused(f"only {' and '.join(s + '://' for s in allowed)} URLs are sent to")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        infos = socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise Refused(f"{parts.hostname} does not resolve: {exc}") from exc
    addresses = [str(info[4][0]) for info in infos]
    if not notification_settings.ALLOW_PRIVATE_ADDRESSES:
        internal = [a for a in addresses if not ipaddress.ip_address(a.split("%")[0]).is_global]
        if internal:
            raise Refused(f"{parts.hostname} resolves to an internal address ({internal[0]})")
    return parts.scheme, parts.hostname, port, addresses[0]


class _Pinned(http.client.HTTPSConnection):
    """An HTTPS connection to an address checked beforehand, verifying the certificate of the URL's host."""

    def __init__(self, host: str, port: int, address: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout, context=ssl.create_default_context())
        self._address = address

    def connect(self) -> None:
        sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)  # type: ignore[attr-defined]


def post(url: str, body: str, headers: dict[str, str]) -> Answer:
    """POST ``body`` (JSON) to ``url``; the receiver's answer. Raises :class:`Refused` for a URL not allowed and
    ``OSError`` (timeouts included) or ``http.client.HTTPException`` when the exchange fails."""
    scheme, host, port, address = check_url(url)
    timeout = float(notification_settings.TIMEOUT)
    parts = urlsplit(url)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    connection: http.client.HTTPConnection = (
        _Pinned(host, port, address, timeout)
        if scheme == "https"
        else http.client.HTTPConnection(address, port, timeout)
    )
    try:
        connection.request(
            "POST",
            path,
            body=body.encode(),
            headers={
                "Host": parts.netloc.rpartition("@")[2],
                "Content-Type": "application/json",
                "User-Agent": USER_AGENT,
                **headers,
            },
        )
        response = connection.getresponse()
        text = response.read(int(notification_settings.MAX_RESPONSE_BYTES)).decode("utf-8", "replace")
        return Answer(response.status, text[:1000])
    finally:
        connection.close()
