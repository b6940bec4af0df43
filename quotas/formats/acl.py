"""Access lists: allow or deny a client outright, before any limit is counted.

An :class:`AccessList` is compiled once per rules snapshot from plain
:class:`ACLRule` entries (``plans.rules`` converts its ``ACLEntry`` rows and
the networks of its enabled ``ACLFeed`` rows) and
answers :meth:`AccessList.match` per request with dictionary lookups only: no
database, no Redis. A deny beats an allow; a scoped entry applies only to
requests with that ``quota_scope``; an entry past its ``expires_at`` never
matches, checked at match time so entries lapse without a reload.

IP entries are kept per address family in one table per prefix length present
(masked network int -> entries), so matching an address costs one lookup per
distinct prefix length, however many thousands of entries there are.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from .special_addresses import GLOBAL_UNICAST_V6, NOT_GLOBAL

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

ACTIONS = ("allow", "deny")
KINDS = ("key", "subscription", "user", "ip")  # also the order in which a match is reported: most specific first

_MAPPED_V4 = ipaddress.IPv6Network("::ffff:0:0/96")


@dataclass(frozen=True, slots=True)
class ACLRule:
    """One access-list entry as the engine sees it.

    ``value`` is the API key id (``kind="key"``), user id (``"user"``),
    subscription id (``"subscription"``) or an ``ipaddress`` network (``"ip"``).
    ``expires_at`` is in epoch seconds; ``None`` never expires. ``id`` is an
    ``ACLEntry``'s primary key, or text naming a feed (``"feed:spamhaus-drop"``).
    """

    id: int | str
    action: str  # "allow" or "deny"
    kind: str  # "key", "user", "subscription" or "ip"
    value: Any
    scope: str = ""  # a view's quota_scope; empty: every request
    expires_at: float | None = None
    reason: str = ""

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"ACL action must be one of {ACTIONS}, not {self.action!r}")
        if self.kind not in KINDS:
            raise ValueError(f"ACL kind must be one of {KINDS}, not {self.kind!r}")
        if self.kind == "ip":
            object.__setattr__(self, "value", as_network(self.value))

    @property
    def is_deny(self) -> bool:
        return self.action == "deny"

    def applies(self, scope: str, now: float) -> bool:
        """Whether the entry is in force for a request with ``scope`` at ``now``."""
        return (not self.scope or self.scope == scope) and (self.expires_at is None or now < self.expires_at)


def parse_network(text: str) -> IPNetwork:
    """``text`` (an address or CIDR, IPv4 or IPv6) as a network; host bits are cleared.

    An IPv4-mapped IPv6 network (``::ffff:10.0.0.0/104``) becomes the IPv4
    network it denotes. Raises :class:`ValueError` for anything else.
    """
    text = text.strip()
    try:
        if "%" in text:  # a zone index names an interface, not a network
            raise ValueError("zone index")
        network = ipaddress.ip_network(text, strict=False)
    except ValueError as exc:
        raise ValueError(f"{text!r} is not an IP address or network") from exc
    return as_network(network)


#: An allow list whose networks cover this share of an address family's space or more is refused: it
#: would lift every limit for nearly every client. Half, so that ``0.0.0.0/1`` alone, or ``0.0.0.0/1`` with
#: ``128.0.0.0/1``, is refused as ``0.0.0.0/0`` is, while any list a real allow feed holds (a provider's
#: ranges, an office's prefixes) is far below it.
EVERYONE_SHARE = 0.5
#: How many of the collapsed networks a refusal names.
_SHOWN_NETWORKS = 3


def covers_everyone(networks: Iterable[IPNetwork]) -> str | None:
    """Why allowing ``networks`` together would lift every limit, or None when they cover less than
    :data:`EVERYONE_SHARE` of the IPv4 and of the IPv6 addresses.

    Counted by the addresses covered (the networks collapsed, overlaps once), not by prefix length.
    """
    by_version: dict[int, list[IPNetwork]] = {}
    for network in networks:
        by_version.setdefault(network.version, []).append(network)
    for version, found in sorted(by_version.items()):
        collapsed = list(ipaddress.collapse_addresses(found))  # type: ignore[type-var]  # one version each
        covered = sum(n.num_addresses for n in collapsed)
        space = 2 ** found[0].max_prefixlen
        if covered >= space * EVERYONE_SHARE:
            shown = ", ".join(str(n) for n in collapsed[:_SHOWN_NETWORKS])
            shown += ", …" if len(collapsed) > _SHOWN_NETWORKS else ""
            return f"{shown} ({covered / space:.0%} of the IPv{version} addresses)"
    return None


#: The public space of each IP version an allow list's share is measured against: every IPv4 address, IPv6's
#: global unicast (every public IPv6 address lies in it; the rest is unallocated or special-purpose).
PUBLIC_SPACE: dict[int, IPNetwork] = {4: ipaddress.IPv4Network("0.0.0.0/0"), 6: GLOBAL_UNICAST_V6}
_SPACE_NAMES = {4: "IPv4 addresses", 6: "IPv6 addresses (global unicast, 2000::/3)"}


def _public_addresses(network: IPNetwork) -> int:
    """How many addresses of ``network`` are public: inside :data:`PUBLIC_SPACE`, outside every special-purpose
    block that is not globally reachable (those blocks are collapsed, so no address is subtracted twice)."""
    space = PUBLIC_SPACE[network.version]
    if space.subnet_of(network):  # type: ignore[arg-type]  # one version
        network = space
    elif not network.subnet_of(space):  # type: ignore[arg-type]
        return 0
    count = network.num_addresses
    for block in NOT_GLOBAL[network.version]:
        if network.subnet_of(block):  # type: ignore[arg-type]
            return 0
        if block.subnet_of(network):  # type: ignore[arg-type]
            count -= block.num_addresses
    return count


def public_share(networks: Iterable[IPNetwork]) -> dict[int, float]:
    """The share of each IP version's :data:`PUBLIC_SPACE` that ``networks`` cover together (4 and 6: a number
    from 0 to 1), overlaps counted once. Addresses that are not globally reachable (private, loopback, ULA,
    documentation...: :mod:`quotas.formats.special_addresses`) count for nothing: allowing the platform's own
    private networks whole lifts no limit for anyone on the Internet."""
    by_version: dict[int, list[IPNetwork]] = {4: [], 6: []}
    for network in networks:
        by_version[network.version].append(network)
    shares = {}
    for version, found in by_version.items():
        collapsed: Iterable[IPNetwork] = ipaddress.collapse_addresses(found)  # type: ignore[type-var]  # one version
        shares[version] = sum(_public_addresses(n) for n in collapsed) / PUBLIC_SPACE[version].num_addresses
    return shares


def percent(share: float) -> str:
    """``share`` (0 to 1) as a percentage with three significant digits: ``75 %``, ``0.00153 %``."""
    return f"{share * 100:.3g} %"


def over_share(networks: Iterable[IPNetwork], ceiling: float) -> str | None:
    """Why allowing ``networks`` together lifts limits for more than ``ceiling`` of the public addresses of an IP
    version (:func:`public_share`), or None when they stay within it."""
    for version, share in public_share(networks).items():
        if share > ceiling:
            return f"{percent(share)} of the public {_SPACE_NAMES[version]}, over the ceiling of {percent(ceiling)}"
    return None


def as_network(value: IPNetwork | str) -> IPNetwork:
    """``value`` as a network, IPv4-mapped IPv6 networks as IPv4 (see :func:`parse_network`)."""
    if isinstance(value, str):
        return parse_network(value)
    network = value
    if isinstance(network, ipaddress.IPv6Network) and network.subnet_of(_MAPPED_V4):
        return ipaddress.IPv4Network(
            (int(network.network_address) & 0xFFFFFFFF, network.prefixlen - _MAPPED_V4.prefixlen)
        )
    return network


def _ordered(rules: Iterable[ACLRule]) -> tuple[ACLRule, ...]:
    # Within one bucket: denies first, then scoped before unscoped, then admin entries (oldest first) before
    # feeds' (by name): ids of the two kinds are never compared with each other.
    return tuple(sorted(rules, key=lambda r: (not r.is_deny, not r.scope, isinstance(r.id, str), r.id)))


class _NetworkTable:
    """Networks of one address family: per prefix length, masked network int -> entries."""

    __slots__ = ("_tables", "bits")

    def __init__(self, bits: int, rules: Iterable[ACLRule]) -> None:
        self.bits = bits
        by_length: dict[int, dict[int, list[ACLRule]]] = {}
        for rule in rules:
            net = rule.value
            by_length.setdefault(net.prefixlen, {}).setdefault(int(net.network_address), []).append(rule)
        # Longest prefix first, so the most specific entry is the one reported.
        self._tables: tuple[tuple[int, dict[int, tuple[ACLRule, ...]]], ...] = tuple(
            (self._mask(length), {k: _ordered(v) for k, v in table.items()})
            for length, table in sorted(by_length.items(), reverse=True)
        )

    def _mask(self, length: int) -> int:
        return ((1 << length) - 1) << (self.bits - length)

    def lookup(self, address: int) -> Iterator[tuple[ACLRule, ...]]:
        for mask, table in self._tables:
            found = table.get(address & mask)
            if found is not None:
                yield found

    def __bool__(self) -> bool:
        return bool(self._tables)

    def __len__(self) -> int:
        """The prefix lengths present: the lookups one address costs."""
        return len(self._tables)


class AccessList:
    """An immutable, compiled set of :class:`ACLRule` entries (one per rules snapshot)."""

    __slots__ = ("_by_id", "_v4", "_v6", "rules")

    def __init__(self, rules: Iterable[ACLRule] = ()) -> None:
        self.rules: tuple[ACLRule, ...] = tuple(rules)
        grouped: dict[str, dict[str, list[ACLRule]]] = {"key": {}, "subscription": {}, "user": {}}
        v4: list[ACLRule] = []
        v6: list[ACLRule] = []
        for rule in self.rules:
            if rule.kind == "ip":
                (v4 if isinstance(rule.value, ipaddress.IPv4Network) else v6).append(rule)
            else:
                # Ids are compared as text: a user id may arrive as 5 or "5" (or a UUID).
                grouped[rule.kind].setdefault(str(rule.value), []).append(rule)
        self._by_id: tuple[tuple[str, dict[str, tuple[ACLRule, ...]]], ...] = tuple(
            (kind, {k: _ordered(v) for k, v in grouped[kind].items()}) for kind in KINDS[:3]
        )
        self._v4 = _NetworkTable(32, v4)
        self._v6 = _NetworkTable(128, v6)

    def __len__(self) -> int:
        return len(self.rules)

    def __iter__(self) -> Iterator[ACLRule]:
        return iter(self.rules)

    def __repr__(self) -> str:
        return f"<AccessList: {len(self.rules)} entries>"

    def match(
        self,
        *,
        key_id: int | None = None,
        user_id: Any | None = None,
        subscription_id: int | None = None,
        ip: IPAddress | None = None,
        scope: str = "",
        now: float,
    ) -> ACLRule | None:
        """The entry deciding this request, or ``None`` when no entry applies.

        Every given identity is checked (API key, subscription, user, IP).
        Any applicable deny wins over any allow; among entries of one action
        the most specific is returned (key, subscription, user, then the
        longest IP prefix; a scoped entry before an unscoped one).
        """
        if not self.rules:
            return None
        allow = None
        for found in self._candidates(key_id, user_id, subscription_id, ip):
            for rule in found:
                if rule.applies(scope, now):
                    if rule.is_deny:
                        return rule
                    if allow is None:
                        allow = rule
                    break  # the rest of this bucket is allows (denies sort first)
        return allow

    def _candidates(
        self, key_id: int | None, user_id: Any | None, subscription_id: int | None, ip: IPAddress | None
    ) -> Iterator[tuple[ACLRule, ...]]:
        for (_kind, table), ident in zip(self._by_id, (key_id, subscription_id, user_id), strict=True):
            if ident is not None and table:
                found = table.get(str(ident))
                if found is not None:
                    yield found
        if ip is not None:
            ip, network_table = self._table_of(ip)
            if network_table:
                yield from network_table.lookup(int(ip))

    def ip_lookups(self, ip: IPAddress) -> int:
        """Table lookups :meth:`match` makes for the address ``ip``: one per prefix length present among the
        entries of its family, however many entries there are."""
        return len(self._table_of(ip)[1])

    def _table_of(self, ip: IPAddress) -> tuple[IPAddress, _NetworkTable]:
        """``ip`` as its entries are matched (an IPv4-mapped IPv6 address as IPv4), and its family's table."""
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        return ip, self._v4 if isinstance(ip, ipaddress.IPv4Address) else self._v6
