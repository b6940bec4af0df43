"""manage.py seed_demo: the demo plans, limits and one API key per plan (idempotent)."""

from __future__ import annotations

import hashlib
import hmac
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import transaction

from plans.models import API_KEY_PREFIX, APIKey, CostBudget, EndpointLimit, Plan, Subscription
from quotas.internal_api import hash_api_key

DEMO_PLANS: list[dict[str, Any]] = [
    {
        "slug": "free", "name": "Free", "monthly_price": Decimal("0"), "priority": 0, "is_default": True,
        "description": "For trying the API.",
        "limits": [
            {"name": "global", "rates": "10/s; 100/min; 1000/day", "algorithm": "token_bucket"},
            {"name": "search", "scope": "search", "rates": "10/min", "algorithm": "sliding_window_log"},
            {"name": "generate", "scope": "generate", "rates": "10/min; 100/day", "algorithm": "fixed_window"},
        ],
        "budgets": [("day", "0.50"), ("month", "5.00")],
    },
    {
        "slug": "pro", "name": "Pro", "monthly_price": Decimal("49"), "priority": 5,
        "description": "For production apps.",
        "limits": [
            {"name": "global", "rates": "50/s; 1000/min; 50000/day", "algorithm": "token_bucket"},
            {"name": "search", "scope": "search", "rates": "100/min", "algorithm": "sliding_window_counter"},
            {"name": "generate", "scope": "generate", "rates": "60/min; 2000/day", "algorithm": "token_bucket"},
        ],
        "budgets": [("day", "20.00"), ("month", "300.00")],
    },
    {
        "slug": "enterprise", "name": "Enterprise", "monthly_price": Decimal("499"), "priority": 10,
        "description": "For heavy users, shed last under load.",
        "limits": [
            {"name": "global", "rates": "500/s; 20000/min", "algorithm": "token_bucket", "burst": 1000},
            {"name": "search", "scope": "search", "rates": "2000/min", "algorithm": "sliding_window_counter"},
            {"name": "generate", "scope": "generate", "rates": "600/min", "algorithm": "leaky_bucket",
             "max_delay": 0.5},
        ],
        "budgets": [("day", "500.00")],
    },
]  # fmt: skip


def demo_key(slug: str) -> str:
    """A stable raw key per demo plan (derived from SECRET_KEY), so seeding can reprint it."""
    digest = hmac.new(settings.SECRET_KEY.encode(), f"demo-key:{slug}".encode(), hashlib.sha256).hexdigest()
    return f"{API_KEY_PREFIX}demo_{slug}_{digest[:24]}"


class Command(BaseCommand):
    help = "Create the demo plans (free, pro, enterprise), their limits and one API key each. Idempotent."

    @transaction.atomic
    def handle(self, *args: Any, **options: Any) -> None:
        for spec in DEMO_PLANS:
            spec = dict(spec)
            limits = spec.pop("limits")
            budgets = spec.pop("budgets")
            slug = spec.pop("slug")
            plan, _ = Plan.objects.update_or_create(slug=slug, defaults=spec)
            for limit in limits:
                limit = dict(limit)
                name = limit.pop("name")
                obj = EndpointLimit(plan=plan, name=name, **limit)
                existing = EndpointLimit.objects.filter(plan=plan, name=name).first()
                if existing is None:
                    obj.full_clean()
                    obj.save()
            for period, amount in budgets:
                CostBudget.objects.get_or_create(plan=plan, period=period, defaults={"amount": Decimal(amount)})
            sub, _ = Subscription.objects.get_or_create(name=f"Demo {plan.name} customer", defaults={"plan": plan})
            raw = demo_key(slug)
            if not APIKey.objects.filter(key_hash=hash_api_key(raw)).exists():
                APIKey.issue(sub, name=f"demo-{slug}", raw=raw)
            self.stdout.write(f"{slug:<11} X-API-Key: {raw}")
