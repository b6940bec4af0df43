"""A slow webhook receiver against the real dispatcher: each delivery ends at its deadline, holds up only its own
endpoint, counts against that endpoint alone, and every webhook is signed when it is sent, not when the run
began. Receivers are real HTTP servers on loopback (one trickling its answer a byte at a time)."""

from __future__ import annotations

import json
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from notifications.dispatch import dispatch_due
from notifications.models import Delivery, Endpoint
from notifications.record import record_event
from notifications.secrets import encrypt, new_secret
from tests.factories import SubscriptionFactory
from tests.serving import served
from tests.slow_server import slow_server

from .test_webhooks import documented_verifier

pytestmark = [pytest.mark.django_db, pytest.mark.slow]


def endpoint_for(subscription, url: str) -> tuple[Endpoint, str]:
    secret = new_secret()
    return Endpoint.objects.create(
        subscription=subscription, url=url, events=[], secret_encrypted=encrypt(secret)
    ), secret


def raise_events(subscription, count: int) -> None:
    now = timezone.now()
    for n in range(count):
        record_event("refusals.sustained", subscription, f"slow-{n}", {"refused": n, "at": now.isoformat()}, now)


def test_a_trickling_receiver_ends_at_the_deadline_and_holds_up_no_other_endpoint(receiver, set_quotas):
    """TIMEOUT 1 s: the receiver sending a byte every 0.1 s (about 13 s for its answer) is cut off at about 1 s,
    a timeout that counts against its endpoint only; the other endpoint got its webhook before then, and the
    trickling endpoint's second delivery waits for the next run, unattempted."""
    set_quotas(NOTIFICATIONS={"ALLOW_PRIVATE_ADDRESSES": True, "ALLOW_HTTP": True, "TIMEOUT": 1.0})
    subscription = SubscriptionFactory()
    with slow_server(interval=0.1) as slow:
        slow_endpoint, _ = endpoint_for(subscription, slow.url)
        fast_endpoint, _ = endpoint_for(subscription, receiver.url)
        raise_events(subscription, 2)
        started = time.monotonic()
        report = dispatch_due()
        took = time.monotonic() - started
        # One deadline, not one per byte (13 s; the bound leaves a busy machine room); not one per delivery either:
        # the second delivery is deferred, unattempted (below).
        assert took < 6, took
        assert (report.sent, report.failed, report.deferred) == (2, 1, 1)
        assert len(receiver.requests) == 2
        assert len(slow.exchanges) == 1
        (exchange,) = slow.exchanges
        assert not exchange.completed
    failed = Delivery.objects.get(endpoint=slow_endpoint, attempts=1)
    assert (failed.status, failed.failure) == ("pending", "timeout")
    assert "deadline (1 s)" in failed.error
    waiting = Delivery.objects.get(endpoint=slow_endpoint, attempts=0)
    assert waiting.next_attempt_at <= timezone.now()  # due again at once: it was never tried
    assert Endpoint.objects.get(pk=slow_endpoint.pk).consecutive_failures == 1
    assert Endpoint.objects.get(pk=fast_endpoint.pk).consecutive_failures == 0
    assert set(Delivery.objects.filter(endpoint=fast_endpoint).values_list("status", flat=True)) == {"succeeded"}


def test_each_webhook_is_signed_when_it_is_sent(set_quotas):
    """Two deliveries to one receiver that takes about 1.2 s to answer each: the second is signed when it
    leaves, after the first answered, not with the run's start; the documented check accepts both."""
    set_quotas(NOTIFICATIONS={"ALLOW_PRIVATE_ADDRESSES": True, "ALLOW_HTTP": True, "TIMEOUT": 5.0})
    subscription = SubscriptionFactory()
    with slow_server(interval=0.01, body_bytes=60) as slow:
        _, secret = endpoint_for(subscription, slow.url)
        raise_events(subscription, 2)
        assert dispatch_due().sent == 2
        exchanges = slow.exchanges
    stamps = []
    verify = documented_verifier()
    for exchange in exchanges:
        headers = dict(line.split(": ", 1) for line in exchange.head.decode().split("\r\n")[1:])
        assert verify(headers["Quota-Signature"], exchange.body, secret)
        stamps.append(int(dict(p.split("=", 1) for p in headers["Quota-Signature"].split(","))["t"]))
    assert exchanges[1].arrived - exchanges[0].arrived > 1.0
    assert stamps[1] >= stamps[0] + 1
    assert json.loads(exchanges[0].body)["id"] != json.loads(exchanges[1].body)["id"]


def test_a_run_starts_no_delivery_after_its_time_is_up(receiver, set_quotas, monkeypatch):
    """With RUN_FOR at 0 s the run attempts nothing: each delivery is due again at once, at its own place in
    line (the time it was due at, not the run's), none counted failed."""
    import notifications.lanes

    set_quotas(NOTIFICATIONS={"ALLOW_PRIVATE_ADDRESSES": True, "ALLOW_HTTP": True})
    monkeypatch.setattr(notifications.lanes, "RUN_FOR", 0.0)
    subscription = SubscriptionFactory()
    endpoint_for(subscription, receiver.url)
    raise_events(subscription, 2)
    places = list(Delivery.objects.order_by("pk").values_list("attempts", "next_attempt_at"))
    now = timezone.now() + timedelta(seconds=5)
    report = dispatch_due(now)
    assert (report.sent, report.failed, report.deferred) == (0, 0, 2)
    assert receiver.requests == []
    assert list(Delivery.objects.order_by("pk").values_list("attempts", "next_attempt_at")) == places
    assert dispatch_due(now + timedelta(seconds=1)).deferred == 2  # taken again by the next run


def test_a_certificate_that_does_not_verify_is_a_tls_failure(tmp_path, set_quotas):
    """An https:// receiver whose certificate is self-signed: the attempt fails as `tls`, retried; the detail
    (the verification error) is kept for staff."""
    import ssl
    import subprocess
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    set_quotas(NOTIFICATIONS={"ALLOW_PRIVATE_ADDRESSES": True})
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)  # fmt: skip
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    with served(server):
        subscription = SubscriptionFactory()
        endpoint, _ = endpoint_for(subscription, f"https://127.0.0.1:{server.server_address[1]}/hook")
        raise_events(subscription, 1)
        assert dispatch_due().failed == 1
    delivery = Delivery.objects.get(endpoint=endpoint)
    assert (delivery.status, delivery.failure) == ("pending", "tls")
    assert "CERTIFICATE_VERIFY_FAILED" in delivery.error
