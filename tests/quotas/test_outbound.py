"""quotas.outbound, the SSRF-guarded client of webhooks and feeds: which addresses it refuses (IPv4 addresses
embedded in IPv6 forms included), and a deadline for the whole request against a real receiver that trickles."""

from __future__ import annotations

import ipaddress
import time

import pytest

from quotas.outbound import Policy, Refused, check_url, is_internal, request
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
]
#: Public addresses, in every form: still allowed.
PUBLIC = [
    "1.1.1.1",
    "8.8.8.8",
    "2606:4700:4700::1111",
    "64:ff9b::808:808",  # NAT64 of 8.8.8.8
    "2002:808:808::1",  # 6to4 of 8.8.8.8
]


@pytest.mark.parametrize("address", INTERNAL)
def test_an_internal_address_in_any_form_is_internal(address):
    """Each is refused, though ``is_global`` says global for the embedded and site-local forms."""
    assert is_internal(ipaddress.ip_address(address))
    with pytest.raises(Refused, match="resolves to an internal address") as refused:
        check_url(f"https://[{address}]/hook" if ":" in address else f"https://{address}/hook",
                  allow_http=False, allow_private=False)  # fmt: skip
    assert refused.value.kind == "address"


@pytest.mark.parametrize("address", PUBLIC)
def test_a_public_address_in_any_form_is_allowed(address):
    assert not is_internal(ipaddress.ip_address(address))
    host = f"[{address}]" if ":" in address else address
    assert check_url(f"https://{host}/hook", allow_http=False, allow_private=False).address == address


def test_a_host_that_does_not_resolve_is_refused_like_an_internal_one():
    """Same kind as an internal address: whoever reads only the kind cannot tell which names resolve inside."""
    with pytest.raises(Refused) as refused:
        check_url("https://no-such-host.invalid/hook", allow_http=False, allow_private=False)
    assert refused.value.kind == "address"
    with pytest.raises(Refused) as scheme:
        check_url("http://1.1.1.1/hook", allow_http=False, allow_private=False)
    assert scheme.value.kind == "url"


@pytest.mark.slow
def test_a_receiver_that_trickles_is_cut_off_at_the_deadline():
    """A receiver sending one byte every 0.1 s never lets one read wait a second, yet its answer takes about
    13 s: with TIMEOUT=1 the request fails with a timeout about 1 s after it started, and the receiver sees the
    connection closed then."""
    policy = Policy(allow_http=True, allow_private=True, timeout=1.0, limit=65_536)
    with slow_server(interval=0.1) as server:
        started = time.monotonic()
        with pytest.raises(TimeoutError, match="deadline"):
            request("POST", server.url, policy, body=b"{}")
        took = time.monotonic() - started
        assert 0.9 < took < 1.6, took
        (exchange,) = server.exchanges
        assert wait_until(lambda: exchange.ended is not None, 2)
        assert exchange.ended - started < 2.5
        assert not exchange.completed
        assert exchange.body == b"{}"


@pytest.mark.slow
def test_an_answer_within_the_deadline_is_read_whole():
    """The same receiver with a short answer (about 0.8 s in all) under TIMEOUT=3: the answer, in full."""
    policy = Policy(allow_http=True, allow_private=True, timeout=3.0, limit=65_536)
    with slow_server(interval=0.01, body_bytes=10) as server:
        answer = request("GET", server.url, policy)
    assert (answer.status, answer.body, answer.truncated) == (200, b"x" * 10, False)
