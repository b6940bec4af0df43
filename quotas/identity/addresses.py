"""Client addresses: the peer, or X-Forwarded-For behind trusted proxies, and how limits group them.

Behind a proxy, the address a request came from is the proxy's; only a proxy
listed in ``QUOTAS['TRUSTED_PROXIES']`` (or counted by DRF's ``NUM_PROXIES``)
is believed about the client it forwards for. Everything here reads settings
at call time and knows nothing of API keys or users (:mod:`quotas.identity.clients`).
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.http import HttpRequest
from django.utils.module_loading import import_string

from quotas.settings import quota_settings

logger = logging.getLogger(__name__)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def address_group(request: HttpRequest) -> str:
    """The client address of ``request`` as limits count it (an IPv6 client by its /64)."""
    return group_of(client_ip(request))


def group_of(ip: IPAddress) -> str:
    """Address ``ip`` as limits count it: IPv6 by its ``IPV6_PREFIX_LENGTH`` network, IPv4 as it is."""
    return _group_ip(ip, int(quota_settings.IPV6_PREFIX_LENGTH))


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
    hook = quota_settings.CLIENT_IP
    if hook:
        return _hooked_ip(request, hook)
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


def _hooked_ip(request: HttpRequest, path: str) -> IPAddress:
    """The address ``QUOTAS['CLIENT_IP']`` names; one it cannot name (None, not an address) is the unknown
    peer, said once per process (as an unparsable REMOTE_ADDR is)."""
    global _warned_hook
    value = _hook(path)(request)
    ip = _parse_ip(str(value)) if value else None
    if ip is not None:
        return ip
    if not _warned_hook:
        _warned_hook = True
        logger.warning(
            "quotas: QUOTAS['CLIENT_IP'] (%s) named no IP address for a request (it returned %r): such requests "
            "share one anonymous rate limit, and failed sign-ins are limited per username only.",
            path,
            str(value)[:64],
        )
    return UNKNOWN_PEER


@lru_cache(maxsize=4)  # imports the setting's callable once per value, not a request's
def _hook(path: str) -> Callable[[HttpRequest], Any]:
    return import_string(path)


_warned_disagreement = False
_warned_local_peer = False
_warned_hook = False
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
