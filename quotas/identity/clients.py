"""Who is calling: API key, then authenticated user, then client IP.

The result is a :class:`Client` whose ``tag`` is the Redis hash tag of all
its keys. An API key that is sent but unknown, malformed or revoked is an
error (401), never silently treated as anonymous.
"""

from __future__ import annotations

import hashlib
import ipaddress
import logging
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.http import HttpRequest

from quotas.conf import quota_settings
from quotas.engine.keys import client_tag
from quotas.exceptions import AuthThrottled, InvalidAPIKey
from quotas.http import problems
from quotas.identity.auth_failures import address_tag, failed_auth
from quotas.rules.cache import RulesCache
from quotas.rules.snapshot import Subscriber

logger = logging.getLogger(__name__)

MAX_API_KEY_LENGTH = 200
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True, slots=True)
class Client:
    """The identity a decision is made for."""

    kind: str  # "subscription", "user" or "ip"
    ident: str
    tag: str
    subscriber: Subscriber | None = None


def hash_api_key(raw: str) -> str:
    """How API keys are stored and looked up: hex SHA-256 of the raw key.

    Keys are long random tokens, so a fast hash is enough; a slow password
    hash would put milliseconds on every request.
    """
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


def identify(request: HttpRequest, user: Any, rules: RulesCache, auth: Any = None) -> Client:
    """The client of ``request``: its API key, else its user, else its address.

    ``auth`` is what authentication found (DRF's ``request.auth``): a
    :class:`Subscriber` from :class:`quotas.drf.authentication.APIKeyAuthentication`
    is the client. Without that class installed, a key in the header is checked
    here; raises :class:`InvalidAPIKey` for a bad key.
    """
    if isinstance(auth, Subscriber):
        return subscription_client(auth)
    raw_key = api_key_of(request)
    if raw_key is not None and rules.backend is not None:
        return authenticate_key(request, raw_key, rules)
    if user is not None and getattr(user, "is_authenticated", False):
        subscriber = rules.subscriber_for_user(user.pk)
        if subscriber is not None:
            return subscription_client(subscriber)
        return user_client(str(user.pk))
    return _ip_client(client_ip(request), int(quota_settings.IPV6_PREFIX_LENGTH))


def api_key_of(request: HttpRequest) -> str | None:
    """The raw API key ``request`` sends in ``QUOTAS['API_KEY_HEADER']``, or None."""
    return request.META.get(_meta_name(quota_settings.API_KEY_HEADER))


def user_client(pk: str) -> Client:
    """The client of the signed-in user with primary key ``pk`` (no subscription of their own)."""
    return Client("user", pk, client_tag("u", pk))


def subscription_client(subscriber: Subscriber) -> Client:
    """The client of ``subscriber``."""
    return Client("subscription", str(subscriber.id), client_tag("s", str(subscriber.id)), subscriber)


def _ip_client(ip: IPAddress, v6_prefix: int) -> Client:
    group = _group_ip(ip, v6_prefix)
    return Client("ip", group, client_tag("ip", group))


def authenticate_key(request: HttpRequest, raw_key: str, rules: RulesCache) -> Client:
    """The client of API key ``raw_key``; while its address is blocked, only if the key may exist.

    Raises :class:`InvalidAPIKey` (401) for a malformed, unknown, revoked or
    expired key, counting the failure against the client address; and
    :class:`AuthThrottled` (429) for a key this platform does not know while
    the address is over ``QUOTAS['FAILED_AUTH_LIMITS']`` (see
    :mod:`quotas.identity.auth_failures`). Keys are 256-bit random tokens, so a
    valid key from a blocked address is not a lucky guess: it is answered on
    its merits, and one guesser cannot lock out every customer at its address.
    """
    # Parsing the address costs a little: only while some client is blocked, or after a failure.
    wait = failed_auth.wait(address_tag(request)) if failed_auth.blocking else 0
    if wait and not rules.may_know_key(hash_api_key(raw_key.strip())):
        # Refused without a database query: the guesser's stream costs nothing but this set lookup.
        raise AuthThrottled(problems.auth_throttled(wait), wait=wait)
    try:
        return _client_for_key(raw_key, rules)
    except InvalidAPIKey:
        wait = wait or failed_auth.record(address_tag(request))
        if not wait:
            raise
    raise AuthThrottled(problems.auth_throttled(wait), wait=wait)


def address_group(request: HttpRequest) -> str:
    """The client address of ``request`` as limits count it (an IPv6 client by its /64)."""
    return group_of(client_ip(request))


def group_of(ip: IPAddress) -> str:
    """Address ``ip`` as limits count it: IPv6 by its ``IPV6_PREFIX_LENGTH`` network, IPv4 as it is."""
    return _group_ip(ip, int(quota_settings.IPV6_PREFIX_LENGTH))


def _client_for_key(raw_key: str, rules: RulesCache) -> Client:
    raw_key = raw_key.strip()
    if not raw_key or len(raw_key) > MAX_API_KEY_LENGTH or not raw_key.isascii() or not raw_key.isprintable():
        raise InvalidAPIKey(problems.invalid_api_key("malformed"))
    subscriber = rules.subscriber_for_key(hash_api_key(raw_key))
    if subscriber is None:
        raise InvalidAPIKey(problems.invalid_api_key("unknown"))
    if subscriber.revoked:
        raise InvalidAPIKey(problems.invalid_api_key("revoked"))
    if subscriber.key_expires_at is not None and subscriber.key_expires_at <= time.time():
        raise InvalidAPIKey(problems.invalid_api_key("expired"))
    return subscription_client(subscriber)


def client_ip(request: HttpRequest) -> IPAddress:
    """The client address: REMOTE_ADDR, or X-Forwarded-For behind trusted proxies.

    X-Forwarded-For is read only when the direct peer is a trusted proxy, and
    then from the right: the right-most address that is not itself a trusted
    proxy is the client (addresses further left were written by the client
    and can be forged). A peer without an address (a Unix socket) is a
    trusted proxy when ``TRUSTED_PROXIES`` holds ``"unix"``.

    With ``TRUSTED_PROXIES`` empty, DRF's ``REST_FRAMEWORK['NUM_PROXIES']`` is
    honoured as DRF's ``get_ident`` does: 0 means REMOTE_ADDR, N the N-th
    X-Forwarded-For address from the right (see :func:`num_proxies`).
    """
    remote_addr = request.META.get("REMOTE_ADDR", "")
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    trusted = tuple(quota_settings.TRUSTED_PROXIES)
    proxies = num_proxies()
    if not trusted and proxies is not None:
        return _nth_from_right(remote_addr, forwarded, proxies)
    ip = _resolve_ip(remote_addr, forwarded, trusted)
    if not trusted and not _warned_local_peer and (ip.is_loopback or _in(ip, _PROXY_NETWORKS)):
        _warn_local_peer(ip)
    if trusted and proxies and not _warned_disagreement:
        # Both settings say where the client is; only a request shows whether they agree (check W030
        # covers NUM_PROXIES = 0). Compared until the first disagreement, then said once.
        _warn_disagreement(ip, _nth_from_right(remote_addr, forwarded, proxies), proxies)
    return ip


_warned_disagreement = False
_warned_local_peer = False
#: Where a reverse proxy or load balancer usually sits: private (RFC 1918, RFC 4193), shared (CGNAT) and
#: link-local networks. (ipaddress's is_private also counts the documentation ranges.)
_PROXY_NETWORKS = tuple(
    ipaddress.ip_network(n)
    for n in ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16", "fc00::/7"]
)


def _warn_local_peer(peer: IPAddress) -> None:
    """Say once per process that a loopback or private peer with no trusted proxy looks like a proxy.

    Behind a reverse proxy that is not in ``TRUSTED_PROXIES``, every client has
    the proxy's address: they share one anonymous rate limit and one
    failed-authentication count.
    """
    global _warned_local_peer
    _warned_local_peer = True
    logger.warning(
        "quotas: a request came from %s, a loopback or private address, and QUOTAS['TRUSTED_PROXIES'] is empty. "
        "If a reverse proxy or load balancer forwards requests, every client it serves gets this one address "
        "(one anonymous rate limit, one failed-authentication count): add the proxy's address or network to "
        "QUOTAS['TRUSTED_PROXIES'] and have it set X-Forwarded-For.",
        peer,
    )


def _warn_disagreement(ours: IPAddress, drfs: IPAddress, proxies: int) -> None:
    global _warned_disagreement
    if ours != drfs:
        _warned_disagreement = True
        logger.warning(
            "quotas: QUOTAS['TRUSTED_PROXIES'] and REST_FRAMEWORK['NUM_PROXIES'] = %d disagree about a client: "
            "QuotaThrottle counts %s (it follows TRUSTED_PROXIES), DRF's get_ident() would give %s. Make them agree, "
            "or leave TRUSTED_PROXIES empty to follow NUM_PROXIES.",
            proxies,
            ours,
            drfs,
        )


def num_proxies() -> int | None:
    """DRF's ``REST_FRAMEWORK['NUM_PROXIES']`` (None when unset, DRF's default).

    Read from Django's settings rather than DRF's ``api_settings`` so the
    identity layer does not depend on DRF; both read the same dict at call time.
    """
    value = (getattr(settings, "REST_FRAMEWORK", None) or {}).get("NUM_PROXIES")
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _nth_from_right(remote_addr: str, forwarded: str, proxies: int) -> IPAddress:
    """DRF's ``get_ident`` with NUM_PROXIES = ``proxies``: the ``proxies``-th X-Forwarded-For address
    from the right (the left-most when there are fewer), or REMOTE_ADDR for 0 or no header."""
    peer = _parse_ip(remote_addr)
    hops = forwarded.split(",") if forwarded else []
    if proxies and hops:
        ip = _parse_ip(_without_port(hops[-min(proxies, len(hops))].strip()))
        if ip is not None:
            return ip
        # DRF would count the garbage text itself; an address is needed here, and the proxy's is the
        # one thing known (a proxy that writes no address is misconfigured, and says so below).
    return peer if peer is not None else _warn_unparsable_peer(remote_addr, forwarded=not hops)


def _resolve_ip(remote_addr: str, forwarded: str, trusted_cidrs: tuple[str, ...]) -> IPAddress:
    peer = _parse_ip(remote_addr)
    trusted = _trusted_networks(trusted_cidrs)
    if peer is None:
        # No address: the peer is on a Unix socket, which only a local proxy can reach.
        if UNIX_PEER in trusted_cidrs:
            return _forwarded_client(forwarded, trusted) or _warn_unparsable_peer(remote_addr, forwarded=False)
        return _warn_unparsable_peer(remote_addr, forwarded=True)
    if not trusted or not _in(peer, trusted):
        return peer
    return _forwarded_client(forwarded, trusted) or peer


def _forwarded_client(forwarded: str, trusted: tuple) -> IPAddress | None:
    """The right-most X-Forwarded-For hop that is not a trusted proxy (None: none usable)."""
    hops = [h.strip() for h in forwarded.split(",") if h.strip()]
    for hop in reversed(hops):
        ip = _parse_ip(_without_port(hop))
        if ip is None:
            return None  # a trusted proxy would not write garbage; stop believing here
        if not _in(ip, trusted):
            return ip
    return None


#: The TRUSTED_PROXIES entry for a proxy on a Unix socket (REMOTE_ADDR empty or not an address).
UNIX_PEER = "unix"
#: Where a client whose address cannot be read is counted: all such clients share it, so the
#: failed-authentication limit per address leaves it alone (quotas/identity/auth_failures.py).
UNKNOWN_PEER = ipaddress.IPv4Address("0.0.0.0")
_warned_peer = False


def _warn_unparsable_peer(remote_addr: str, forwarded: bool) -> IPAddress:
    """:data:`UNKNOWN_PEER`, after saying once per process why and how to fix it (the cause is in the
    configuration, not in the request)."""
    global _warned_peer
    if not _warned_peer:
        _warned_peer = True
        fix = (
            f"add {UNIX_PEER!r} to QUOTAS['TRUSTED_PROXIES'] (a peer on a Unix socket is then a trusted proxy) "
            "and have the proxy set X-Forwarded-For"
            if forwarded
            else "have the proxy set X-Forwarded-For (nginx: proxy_set_header X-Forwarded-For "
            "$proxy_add_x_forwarded_for)"
        )
        logger.warning(
            "quotas: REMOTE_ADDR %r is not an IP address (a proxy on a Unix socket?) and no client address was "
            "forwarded, so every anonymous client shares one rate limit (failed sign-ins are then limited per "
            "username only). To tell clients apart, %s, or serve over TCP.",
            remote_addr[:64],
            fix,
        )
    return UNKNOWN_PEER


def _without_port(hop: str) -> str:
    """An X-Forwarded-For hop without the port some proxies append: 1.2.3.4:5678, [2001:db8::1]:443."""
    if hop.startswith("["):
        return hop[1 : hop.find("]")] if "]" in hop else hop
    if hop.count(":") == 1:  # IPv4 with a port (a bare IPv6 address has several colons)
        return hop.split(":", 1)[0]
    return hop


def _group_ip(ip: IPAddress, prefix: int) -> str:
    if not isinstance(ip, ipaddress.IPv6Address):
        return str(ip)
    if ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    # One IPv6 host usually owns a whole /64; per-address limits there are trivial to rotate.
    return str(ipaddress.IPv6Network((ip, prefix), strict=False).network_address) + f"/{prefix}"


#: Characters of an address (IPv6 with a zone index included) parsed at most: a longer value is no address.
_ADDRESS_TEXT_MAX = 64


def _parse_ip(value: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(value.split("%", 1)[0]) if len(value) <= _ADDRESS_TEXT_MAX else None
    except ValueError:
        return None


@lru_cache(maxsize=8)  # parses the TRUSTED_PROXIES setting once per value, not a request's data
def _trusted_networks(cidrs: tuple[str, ...]) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(ipaddress.ip_network(c, strict=False) for c in cidrs if c != UNIX_PEER)


def _in(ip: IPAddress, networks: tuple) -> bool:
    return any(ip in net for net in networks)


def _meta_name(header: str) -> str:
    return "HTTP_" + header.upper().replace("-", "_")
