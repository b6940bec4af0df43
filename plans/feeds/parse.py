"""A feed's text as networks, strictly: one address or CIDR a line, ``#`` comments, blank lines.

Any other line makes the whole feed malformed (its last good list is kept): a feed that half parses is more
likely a changed format or an error page than a list to apply in part.
"""

from __future__ import annotations

from quotas.formats.acl import IPNetwork, covers_everyone, parse_network

#: How much of a bad line an error message repeats.
_SHOWN = 60


def parse_feed(data: bytes, action: str) -> list[str]:
    """The distinct networks of ``data``, normalised (host bits cleared, mapped IPv4 as IPv4), in feed order.

    Raises :class:`ValueError` naming the first bad line for text that is not UTF-8, an empty answer, a line
    that is neither an IP address nor a CIDR network, and, in an allow feed, networks covering half or more of
    the IPv4 or IPv6 addresses, alone or together (quotas.formats.acl.covers_everyone).
    """
    if not data.strip():
        raise ValueError("the feed is empty (not even a comment): refused rather than emptying the list")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"the feed is not UTF-8 text (byte {exc.start})") from exc
    networks: dict[str, IPNetwork] = {}  # ordered and distinct
    for number, line in enumerate(text.splitlines(), start=1):
        content = line.split("#", 1)[0].strip()
        if not content:
            continue
        try:
            network = parse_network(content)
        except ValueError:
            shown = content if len(content) <= _SHOWN else content[:_SHOWN] + "…"
            raise ValueError(f"line {number}: {shown!r} is neither an IP address nor a CIDR network") from None
        if action == "allow" and covers_everyone([network]):
            raise ValueError(f"line {number}: allowing {network} would lift every limit for every client")
        networks[str(network)] = network
    if action == "allow" and (covered := covers_everyone(networks.values())):
        raise ValueError(f"allowing these networks would lift every limit for every client: together {covered}")
    return list(networks)
