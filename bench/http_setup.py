"""``python -m bench.http_setup``: the HTTP section's database (``SQLITE_PATH``), printing a bench API key.

Migrates, seeds the demo plans, and adds a ``bench`` plan shaped like the
demo's (one plan-wide limit with per-second, per-minute and per-day rates, a
daily budget) whose numbers no run can reach, with one subscription and key.
The raw key is the last line printed. Runs with ``config.settings``.
"""

from __future__ import annotations

import io
import os
from decimal import Decimal

import django

BENCH_RATES = "10000000/s; 100000000/min; 10000000000/day"


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    from django.core.management import call_command

    from plans.models import APIKey, CostBudget, EndpointLimit, Plan, Subscription

    call_command("migrate", "--noinput", verbosity=0)
    call_command("seed_demo", stdout=io.StringIO())
    plan, _ = Plan.objects.get_or_create(
        slug="bench", defaults={"name": "Bench", "monthly_price": Decimal("0"), "priority": 0}
    )
    limit = EndpointLimit(plan=plan, name="global", rates=BENCH_RATES, algorithm="token_bucket")
    limit.full_clean()
    limit.save()
    CostBudget.objects.create(plan=plan, period="day", amount=Decimal("1000000"))
    subscription = Subscription.objects.create(name="Bench client", plan=plan)
    _, raw = APIKey.issue(subscription, name="bench")
    print(raw)


if __name__ == "__main__":
    main()
