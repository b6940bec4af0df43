"""quotas.outbound, the SSRF-guarded client of webhooks and feeds: which addresses it refuses (IANA's
special-purpose blocks, IPv4 addresses embedded in IPv6 forms included), and a deadline for the whole request,
DNS included, against a real receiver that trickles and a real DNS server that is slow to answer."""

from __future__ import annotations

import ipaddress
import threading
import time

import pytest

from quotas import outbound
from quotas.formats.special_addresses import IPV4_BLOCKS, IPV6_BLOCKS
from quotas.outbound import Policy, Refused, check_url, is_internal, request
from tests.slow_dns import DOMAIN, slow_resolver
from tests.slow_server import slow_server
from tests.waiting import wait_until

#: Addresses ``ipaddress.is_global`` calls global, which lead inside: an IPv4 address embedded in an IPv6 form,
#: or IPv6 site-local.
INTERNAL = [
    "64:ff9b::a9fe:a9fe",  # NAT64 (RFC 6052) of 169.254.169.254, the cloud metadata service
    "64:ff9b::a00:1",  # NAT64 of 10.0.0.1
    "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
    "64:ff9b:1::a00:1",  # the local-use NAT64 prefix (RFC 8215): the operator's own translator
    "::127.0.0.1",  # IPv4-compatible (deprecated)
    "::10.1.2.3",
    "::ffff:127.0.0.1",  # IPv4-mapped
    "::ffff:192.168.1.1",
    "2002:7f00:1::",  # 6to4 of 127.0.0.1
    "2002:a00:1::1",  # 6to4 of 10.0.0.1
    "2002:a9fe:a9fe::",  # 6to4 of 169.254.169.254
    "2001:0:4136:e378:8000:63bf:f5ff:fffe",  # Teredo, client 10.0.0.1 (stored inverted)
    "fec0::1",  # site-local (RFC 3879)
    "feff::1",
    # What is_global already refused stays refused.
    "127.0.0.1",
    "10.0.0.1",
    "169.254.169.254",
    "100.64.0.1",
    "::1",
    "fe80::1",
    "fd00::1",
    # IANA's special-purpose blocks that Python 3.11's is_global calls global (found by a security review).
    "::ffff:0:7f00:1",  # IPv4-translated (RFC 2765) of 127.0.0.1
    "::ffff:0:a9fe:a9fe",  # IPv4-translated of 169.254.169.254
    "192.0.0.8",  # IPv4 dummy address (RFC 7600)
    "192.0.0.9",  # PCP anycast: globally reachable per the registry, refused here (anycast leads nearby)
    "192.0.0.10",  # TURN anycast: the same
    "192.0.0.170",  # NAT64/DNS64 discovery
    "192.88.99.1",  # the deprecated 6to4 relay anycast
    "2001:1::1",  # PCP anycast, IPv6
    "2001:2::1",  # benchmarking
    "3fff::1",  # documentation (RFC 9637)
    "5f00::1",  # SRv6 SIDs (RFC 9602)
    "ff0e::1",  # global-scope multicast
    "224.0.0.251",  # multicast
    "255.255.255.255",  # limited broadcast
    "100::1",  # discard-only
    "64:ff9b::c000:8",  # NAT64 of 192.0.0.8
]
#: Public addresses, in every form: still allowed.
PUBLIC = [
    "1.1.1.1",
    "8.8.8.8",
    "2606:4700:4700::1111",
    "64:ff9b::808:808",  # NAT64 of 8.8.8.8
    "2002:808:808::1",  # 6to4 of 8.8.8.8
    "2001:0:4136:e378:8000:63bf:f7f7:f7f7",  # Teredo, client 8.8.8.8: 2001::/32 is carved out of 2001::/23
    "2001:4860:4860::8888",  # 2001:4860::/32 lies outside 2001::/23
    "2606:4700::1111",
    "192.0.1.1",  # next to 192.0.0.0/24
    "9.9.9.9",
]


def _inside(block: str) -> list[str]:
    """The first, a middle and the last address of ``block``, but Teredo's (decided by the addresses it embeds)."""
    network = ipaddress.ip_network(block)
    middle = network.network_address + network.num_addresses // 2
    found = [network.network_address, middle, network.broadcast_address]
    return [str(a) for a in found if a not in ipaddress.ip_network("2001::/32")]


@pytest.mark.parametrize(("block", "address"), [(b, a) for b, _ in IPV4_BLOCKS + IPV6_BLOCKS for a in _inside(b)])
def test_every_address_of_every_special_purpose_block_is_internal(block, address):
    """The table's blocks (IANA's registries) are refused from first to last address."""
    assert is_internal(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", INTERNAL)
def test_an_internal_address_in_any_form_is_internal(address):
    """Each is refused, though ``is_global`` says global for the embedded and site-local forms."""
    assert is_internal(ipaddress.ip_address(address))
    with pytest.raises(Refused, match="resolves to an internal address") as refused:
        check_url(f"https://[{address}]/hook" if ":" in address else f"https://{address}/hook",
                  allow_http=False, allow_private=False, timeout=5)  # fmt: skip
    assert refused.value.kind == "address"


@pytest.mark.parametrize("address", PUBLIC)
def test_a_public_address_in_any_form_is_allowed(address):
    assert not is_internal(ipaddress.ip_address(address))
    host = f"[{address}]" if ":" in address else address
    assert check_url(f"https://{host}/hook", allow_http=False, allow_private=False, timeout=5).address == address


def test_a_host_that_does_not_resolve_is_refused_like_an_internal_one():
    """Same kind as an internal address: whoever reads only the kind cannot tell which names resolve inside."""
    with pytest.raises(Refused) as refused:
        check_url("https://no-such-host.invalid/hook", allow_http=False, allow_private=False, timeout=5)
    assert refused.value.kind == "address"
    with pytest.raises(Refused) as scheme:
        check_url("http://1.1.1.1/hook", allow_http=False, allow_private=False, timeout=5)
    assert scheme.value.kind == "url"


@pytest.mark.slow
def test_a_receiver_that_trickles_is_cut_off_at_the_deadline():
    """A receiver sending one byte every 0.1 s never lets one read wait a second, yet its answer takes about
    13 s: with TIMEOUT=1 the request fails with a timeout about 1 s after it started, and the receiver sees the
    connection closed then. (The upper bounds leave a busy machine seconds of room, and stay far below 13 s.)"""
    policy = Policy(allow_http=True, allow_private=True, timeout=1.0, limit=65_536)
    with slow_server(interval=0.1) as server:
        started = time.monotonic()
        with pytest.raises(TimeoutError, match="deadline"):
            request("POST", server.url, policy, body=b"{}")
        took = time.monotonic() - started
        assert 0.9 < took < 6, took
        (exchange,) = server.exchanges
        assert wait_until(lambda: exchange.ended is not None, 2)
        assert exchange.ended - started < 7
        assert not exchange.completed
        assert exchange.body == b"{}"


@pytest.mark.slow
def test_an_answer_within_the_deadline_is_read_whole():
    """The same receiver with a short answer (about 0.8 s in all) under TIMEOUT=3: the answer, in full."""
    policy = Policy(allow_http=True, allow_private=True, timeout=3.0, limit=65_536)
    with slow_server(interval=0.01, body_bytes=10) as server:
        answer = request("GET", server.url, policy)
    assert (answer.status, answer.body, answer.truncated) == (200, b"x" * 10, False)


@pytest.mark.slow
def test_a_slow_resolver_counts_against_the_requests_deadline(monkeypatch):
    """A DNS server on loopback answering after 4 s, a request with TIMEOUT=1 to a receiver that would answer at
    once: the request fails with a timeout about 1 s after it began (before the answer, with room for a busy
    machine), and nothing reaches the receiver. (A longer delay would hold the process's few lookup threads
    past the test.)"""
    policy = Policy(allow_http=True, allow_private=True, timeout=1.0, limit=65_536)
    with slow_resolver(monkeypatch, delay=4.0), slow_server(interval=0.001, body_bytes=1) as server:
        url = server.url.replace("127.0.0.1", "hook" + DOMAIN)
        started = time.monotonic()
        with pytest.raises(TimeoutError, match=f"hook{DOMAIN} did not resolve within 1 s"):
            request("POST", url, policy, body=b"{}")
        assert 0.9 < time.monotonic() - started < 3.5
        assert server.exchanges == []


@pytest.mark.slow
def test_the_resolvers_time_and_the_exchanges_share_one_deadline(monkeypatch):
    """The same DNS server answering after 0.8 s and a receiver answering within about 0.8 s: together past
    TIMEOUT=1.1, so the request times out, though neither alone would; with TIMEOUT=3 the answer is read whole."""
    with slow_resolver(monkeypatch, delay=0.8), slow_server(interval=0.01, body_bytes=10) as server:
        url = server.url.replace("127.0.0.1", "hook" + DOMAIN)
        with pytest.raises(TimeoutError, match="deadline"):
            request("GET", url, Policy(allow_http=True, allow_private=True, timeout=1.1, limit=100))
        answer = request("GET", url, Policy(allow_http=True, allow_private=True, timeout=3.0, limit=100))
    assert (answer.status, answer.body) == (200, b"x" * 10)


@pytest.mark.slow
def test_checking_a_url_alone_is_bounded_too(monkeypatch):
    """When an endpoint or feed URL is saved, its check waits for the slow resolver only ``timeout`` seconds."""
    with slow_resolver(monkeypatch, delay=4.0):
        started = time.monotonic()
        with pytest.raises(TimeoutError, match=f"saved{DOMAIN} did not resolve within 0.5 s"):
            check_url(f"https://saved{DOMAIN}/hook", allow_http=False, allow_private=True, timeout=0.5)
        assert time.monotonic() - started < 3.5  # before the answer (4 s), with room for a busy machine
        # A timely answer: the address the slow server gives.
    with slow_resolver(monkeypatch, delay=0.05):
        target = check_url(f"https://saved{DOMAIN}/hook", allow_http=False, allow_private=True, timeout=5)
    assert target.address == "127.0.0.1"


@pytest.mark.slow
def test_a_hung_resolver_holds_a_bounded_number_of_threads(monkeypatch):
    """Thirty requests at once against a resolver that answers after 4 s each time out at their 0.3 s deadline,
    and no more than LOOKUP_THREADS threads are left waiting for it."""
    errors: list[BaseException] = []

    def one(number: int) -> None:
        try:
            check_url(f"https://h{number}{DOMAIN}/", allow_http=False, allow_private=True, timeout=0.3)
        except BaseException as exc:  # counted below
            errors.append(exc)

    with slow_resolver(monkeypatch, delay=4.0):
        callers = [threading.Thread(target=one, args=(n,)) for n in range(30)]
        for caller in callers:
            caller.start()
        for caller in callers:
            caller.join(5)
        lookups = [t for t in threading.enumerate() if t.name == "outbound-lookup"]
    assert len(errors) == 30
    assert all(isinstance(e, TimeoutError) for e in errors)
    assert 0 < len(lookups) <= outbound.LOOKUP_THREADS
