"""A real HTTP receiver for webhooks (a server on a loopback port, in a thread), and a metered subscription."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from notifications.models import Contact, Endpoint
from notifications.secrets import encrypt, new_secret
from plans.models import CostBudget, Subscription
from tests.factories import EndpointLimitFactory, PlanFactory, issue_key
from tests.serving import served


@dataclass
class Received:
    """One request the receiver got."""

    path: str
    headers: dict[str, str]
    body: bytes
    arrived: float = field(default_factory=time.time)  # Unix time, to compare with an event's


@dataclass
class Receiver:
    """A webhook receiver: what it got, and the statuses it answers with (then 200)."""

    url: str
    requests: list[Received] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    state = Receiver(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            state.requests.append(Received(self.path, dict(self.headers), body))
            status = state.statuses.pop(0) if state.statuses else 200
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(b"ok" if status < 300 else b"receiver failed")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/quota"
    with served(server):
        yield state


@pytest.fixture
def internal_allowed(set_quotas) -> None:
    """The receiver is on loopback over plain HTTP: allowed here, refused by default."""
    set_quotas(NOTIFICATIONS={"ALLOW_PRIVATE_ADDRESSES": True, "ALLOW_HTTP": True})


@dataclass
class Metered:
    """A subscription priced 0.01 a request on /t/priced with a daily budget of 0.05, its key, endpoint and contact."""

    subscription: Subscription
    key: str
    endpoint: Endpoint
    secret: str
    contact: Contact


@pytest.fixture
def metered(db, receiver: Receiver) -> Metered:
    plan = PlanFactory(slug="metered")
    EndpointLimitFactory(plan=plan, name="priced", scope="priced", rates="1000/min", price=Decimal("0.01"))
    CostBudget.objects.create(plan=plan, period="day", amount=Decimal("0.05"))
    key = issue_key(plan=plan)
    subscription = Subscription.objects.get(plan=plan)
    secret = new_secret()
    endpoint = Endpoint.objects.create(
        subscription=subscription,
        url=receiver.url,
        events=["budget.threshold_crossed"],
        secret_encrypted=encrypt(secret),
    )
    contact = Contact.objects.create(subscription=subscription, email="billing@acme.example")
    return Metered(subscription, key, endpoint, secret, contact)


@pytest.fixture
def matches_schema():
    """``matches_schema(body)``: the errors of a webhook body against notifications/event.schema.json ([]: none)."""
    import json
    from pathlib import Path

    from jsonschema import Draft202012Validator, FormatChecker

    path = Path(__file__).resolve().parents[2] / "notifications" / "event.schema.json"
    check = Draft202012Validator(json.loads(path.read_text(encoding="utf-8")), format_checker=FormatChecker())
    return lambda body: [f"{list(e.absolute_path)}: {e.message}" for e in check.iter_errors(body)]
