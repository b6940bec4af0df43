"""The special-purpose address blocks no request to a URL an operator enters may reach, and no allow list counts as
public: one table, read by the SSRF guard (:func:`quotas.outbound.is_internal`) and by the allow lists' ceiling
(:func:`quotas.formats.acl.public_share`).

Written from IANA's *IPv4 Special-Purpose Address Registry* and *IPv6 Special-Purpose Address Registry*
(iana.org/assignments/iana-ipv4-special-registry, .../iana-ipv6-special-registry) as they stood in 2025, newest
entries RFC 9637's ``3fff::/20``, RFC 9602's ``5f00::/16`` and RFC 9780's ``100:0:0:1::/64``; written by hand,
not downloaded (nothing is fetched at run time): compare it with the registries when reviewing. Every block whose
"Globally Reachable" is False is here, plus the few this guard treats more strictly, each saying why.
Python's ``ipaddress.is_global`` follows the same registries
but its table changes between versions (3.11 lacks ``3fff::/20``, ``5f00::/16``, and calls ``ff00::/8`` global), so
the guard does not rest on it alone.

Blocks left out on purpose, because where they lead is decided by the IPv4 address they embed
(:func:`quotas.outbound.embedded_ipv4`): ``64:ff9b::/96`` (NAT64, globally reachable), ``2001::/32`` (Teredo) and
``2002::/16`` (6to4) ("N/A" in the registry). IPv4-compatible ``::/96`` (deprecated, not in the registry) is
decided the same way.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

#: (block, what it is): IPv4 blocks that are not globally reachable.
IPV4_BLOCKS: tuple[tuple[str, str], ...] = (
    ("0.0.0.0/8", '"This network" (RFC 791)'),
    ("10.0.0.0/8", "Private-Use (RFC 1918)"),
    ("100.64.0.0/10", "Shared Address Space, carrier-grade NAT (RFC 6598)"),
    ("127.0.0.0/8", "Loopback (RFC 1122)"),
    ("169.254.0.0/16", "Link Local (RFC 3927): cloud metadata services live here"),
    ("172.16.0.0/12", "Private-Use (RFC 1918)"),
    # The registry calls 192.0.0.9/32 (PCP anycast, RFC 7723) and 192.0.0.10/32 (TURN anycast, RFC 8155)
    # globally reachable; refused with the rest of the block all the same: an anycast address leads to the
    # nearest server of that service, most likely one in the platform's own network, and neither serves a
    # webhook or a feed.
    ("192.0.0.0/24", "IETF Protocol Assignments (RFC 6890): 192.0.0.8 dummy, NAT64 discovery, ..."),
    ("192.0.2.0/24", "Documentation, TEST-NET-1 (RFC 5737)"),
    # Deprecated (RFC 7526), "N/A" in the registry: a 6to4 relay answering here is an anycast relay, as above.
    ("192.88.99.0/24", "Deprecated 6to4 Relay Anycast (RFC 7526)"),
    ("192.168.0.0/16", "Private-Use (RFC 1918)"),
    ("198.18.0.0/15", "Benchmarking (RFC 2544)"),
    ("198.51.100.0/24", "Documentation, TEST-NET-2 (RFC 5737)"),
    ("203.0.113.0/24", "Documentation, TEST-NET-3 (RFC 5737)"),
    # Not in the special-purpose registry but in IANA's multicast one: no unicast server answers there.
    ("224.0.0.0/4", "Multicast (RFC 5771)"),
    ("240.0.0.0/4", "Reserved (RFC 1112)"),  # 255.255.255.255/32, limited broadcast (RFC 919), included
)

#: (block, what it is): IPv6 blocks that are not globally reachable.
IPV6_BLOCKS: tuple[tuple[str, str], ...] = (
    ("::/128", "Unspecified Address (RFC 4291)"),
    ("::1/128", "Loopback Address (RFC 4291)"),
    ("::ffff:0:0/96", "IPv4-mapped Address (RFC 4291): a dual-stack socket connects to the IPv4 address"),
    # Not in the registry (RFC 2765 is obsolete), yet ::ffff:0:7f00:1 is not global, whatever is_global says.
    ("::ffff:0:0:0/96", "IPv4-translated Address (RFC 2765)"),
    ("64:ff9b:1::/48", "IPv4-IPv6 Translation, local use (RFC 8215): the operator's own translator"),
    ("100::/64", "Discard-Only Address Block (RFC 6666)"),
    ("100:0:0:1::/64", "Dummy IPv6 Prefix (RFC 9780)"),
    # 2001::/23 but Teredo's 2001::/32 (decided by its embedded addresses), see IPV6_CARVED. The registry calls
    # some of its blocks globally reachable (PCP, TURN and DNS-SD SRP anycast, AMT, AS112-v6, ORCHIDv2, drone
    # DETs); refused all the same: anycast leads to the nearest server, ORCHIDs and DETs are identifiers, and
    # none serves a webhook or a feed.
    ("2001::/23", "IETF Protocol Assignments (RFC 2928)"),
    ("2001:db8::/32", "Documentation (RFC 3849)"),
    ("3fff::/20", "Documentation (RFC 9637)"),
    ("5f00::/16", "Segment Routing (SRv6) SIDs (RFC 9602)"),
    ("fc00::/7", "Unique-Local (RFC 4193)"),
    ("fe80::/10", "Link-Local Unicast (RFC 4291)"),
    ("fec0::/10", "Site-Local, deprecated (RFC 3879), yet still routed inside some networks"),
    ("ff00::/8", "Multicast (RFC 4291)"),
)

#: Blocks inside a listed one that the table leaves to the embedded-IPv4 logic.
IPV6_CARVED = (ipaddress.IPv6Network("2001::/32"),)  # Teredo (RFC 4380): "N/A" in the registry

#: IANA's global unicast allocation for IPv6 (RFC 4291, 3587): every public IPv6 address lies inside it.
GLOBAL_UNICAST_V6 = ipaddress.IPv6Network("2000::/3")


def _collapsed(table: Iterable[tuple[str, str]], holes: Iterable[IPNetwork] = ()) -> tuple[IPNetwork, ...]:
    networks: list[IPNetwork] = []
    holes = list(holes)
    for text, _ in table:
        block = ipaddress.ip_network(text)
        inside = [hole for hole in holes if hole.version == block.version and hole.subnet_of(block)]  # type: ignore[arg-type]
        # At most one hole a block in these tables.
        networks.extend(block.address_exclude(inside[0]) if inside else [block])  # type: ignore[arg-type]
    return tuple(ipaddress.collapse_addresses(networks))  # type: ignore[type-var]


#: The table's blocks per IP version, holes carved out, collapsed (sorted, no overlaps).
NOT_GLOBAL: dict[int, tuple[IPNetwork, ...]] = {4: _collapsed(IPV4_BLOCKS), 6: _collapsed(IPV6_BLOCKS, IPV6_CARVED)}


def special_block(address: IPAddress) -> IPNetwork | None:
    """The block of the table ``address`` lies in (it is not globally reachable), or None."""
    for block in NOT_GLOBAL[address.version]:
        if address in block:
            return block
    return None
