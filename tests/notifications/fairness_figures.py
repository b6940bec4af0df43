"""The security review's scene at its own scale, run by hand (minutes: not a test), for the figures in
docs/notifications.md: one subscription with ENDPOINTS slow endpoints (a receiver trickling its answer, so each
attempt ends at TIMEOUT, default 5 s) and one ``api_key.expiring`` event for all of them; another subscription's
``client.banned`` recorded 0.5 s into the dispatcher's first run. Prints how long that webhook waited.

    SECRET_KEY=x .venv/bin/python -m tests.notifications.fairness_figures 150 10

(one run per ENDPOINTS given). It uses a database of its own (SQLite, in a temporary directory), the
dispatcher of the checkout it runs in (the driver of tests/notifications/fairness.py) and loopback receivers.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.serving import served


@dataclass
class Arrivals:
    """A receiver's URL and the Unix times its requests arrived."""

    url: str = ""
    times: list[float] = field(default_factory=list)


@contextmanager
def receiving() -> Iterator[Arrivals]:
    """A receiver on loopback answering 200 at once, for as long as the block lasts."""
    arrivals = Arrivals()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            arrivals.times.append(time.time())
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    arrivals.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    with served(server):
        yield arrivals


def measure(endpoint_count: int, timeout: float, interval: float = 5.0) -> str:
    """One scene: how long the other subscription's webhook waited, and the dispatcher's runs."""
    from django.utils import timezone

    from notifications.models import Event
    from plans.models import Subscription
    from tests.factories import SubscriptionFactory
    from tests.notifications.fairness import backlog, due_in, endpoints, notifier, one_event
    from tests.slow_server import slow_server

    Subscription.objects.all().delete()  # the scene before's endpoints, events and deliveries with them
    Event.objects.all().delete()
    a, b = SubscriptionFactory(), SubscriptionFactory()
    with slow_server(interval=0.1, body_bytes=200) as slow, receiving() as arrivals:
        endpoints(a, slow.url, endpoint_count)
        endpoints(b, arrivals.url, 1)
        backlog(a, 1, timezone.now() - timedelta(seconds=1))
        recorded = due_in(0.5)
        one_event(b, recorded)
        runs = notifier(lambda: bool(arrivals.times), interval, give_up_after=300)
        waited = arrivals.times[0] - recorded.timestamp() if arrivals.times else float("inf")
        tried = len(slow.exchanges)
    spans = ", ".join(f"{s:.1f}-{e:.1f}" for s, e in runs.spans)
    scene = f"{endpoint_count} slow endpoints, TIMEOUT {timeout:g} s"
    return f"{scene}: waited {waited:.1f} s (runs {spans}; {tried} tried)"


def main(counts: list[int]) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    with tempfile.TemporaryDirectory(prefix="fairness-") as tmp:
        os.environ["SQLITE_PATH"] = str(Path(tmp) / "db.sqlite3")
        import django
        from django.conf import settings
        from django.core.management import call_command

        django.setup()
        call_command("migrate", verbosity=0)
        timeout = float(os.environ.get("TIMEOUT", "5"))
        notifications = {"ALLOW_PRIVATE_ADDRESSES": True, "ALLOW_HTTP": True, "TIMEOUT": timeout}
        settings.QUOTAS = {**settings.QUOTAS, "NOTIFICATIONS": notifications}
        for count in counts:
            print(measure(count, timeout), flush=True)


if __name__ == "__main__":
    main([int(arg) for arg in sys.argv[1:]] or [150, 10])
