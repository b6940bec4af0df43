"""``python -m bench.http_setup``: the HTTP section's database (``SQLITE_PATH``), printing the bench clients.

Migrates, seeds the demo plans, and adds two plans, each with one subscription
and key:

- ``bench``, one plan-wide limit of :data:`BENCH_RATE`, a sliding window
  counter no run can reach: the allowed stream's client, limited exactly as
  the ``limits`` peer limits it (until 2026-11-23 this plan was shaped like
  the demo's, three rates and a daily budget, which compared three limits
  and a budget with the peer's one);
- ``bench-denied``, one plan-wide limit of :data:`DENIED_RATE`: the denied
  stream's client, refused from its second request on.

The last line printed is JSON: ``{"allowed_key", "denied_key",
"denied_plan_id", "denied_rate"}`` (the raw keys, and what the ``limits``
peer needs to refuse the same client at the same rate). Runs with
``config.settings``.
"""

from __future__ import annotations

import io
import json
import os
from decimal import Decimal

import django

#: The allowed client's rate: the ``limits`` peer's (bench.limits_http), in a syntax both read.
BENCH_RATE = "1000000/min"
#: The denied client's rate, in a syntax both QuotaThrottle and ``limits`` read.
DENIED_RATE = "1/day"


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    from django.core.management import call_command

    from plans.models import APIKey, EndpointLimit, Plan, Subscription

    def plan_with_key(slug: str, rates: str, algorithm: str) -> tuple[Plan, str]:
        plan, _ = Plan.objects.get_or_create(
            slug=slug, defaults={"name": slug.title(), "monthly_price": Decimal("0"), "priority": 0}
        )
        limit = EndpointLimit(plan=plan, name="global", rates=rates, algorithm=algorithm)
        limit.full_clean()
        limit.save()
        subscription = Subscription.objects.create(name=f"{slug} client", plan=plan)
        _, raw = APIKey.issue(subscription, name=slug)
        return plan, raw

    call_command("migrate", "--noinput", verbosity=0)
    call_command("seed_demo", stdout=io.StringIO())
    # Both with the algorithm of the peer they are compared with (limits' sliding window counter).
    _, allowed_key = plan_with_key("bench", BENCH_RATE, "sliding_window_counter")
    denied_plan, denied_key = plan_with_key("bench-denied", DENIED_RATE, "sliding_window_counter")
    print(
        json.dumps(
            {
                "allowed_key": allowed_key,
                "denied_key": denied_key,
                "denied_plan_id": denied_plan.pk,
                "denied_rate": DENIED_RATE,
            }
        )
    )


if __name__ == "__main__":
    main()
