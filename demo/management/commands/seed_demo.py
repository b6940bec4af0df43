"""manage.py seed_demo: the demo plans of demo/plans.yaml, a subscription and one API key per plan (idempotent)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from demo.seed import demo_key, demo_plans
from plans.models import APIKey, Plan, Subscription
from plans.plansfile import Document, PlansFileError
from plans.plansfile.apply import apply_document
from quotas.internal_api import hash_api_key


class Command(BaseCommand):
    help = (
        "Create the demo plans of demo/plans.yaml (free, pro, enterprise) that do not exist yet, and a "
        "subscription with one API key on each. Idempotent; plans already there are left as they are (to make "
        "them match the file: manage.py quota_plans apply demo/plans.yaml)."
    )

    @transaction.atomic
    def handle(self, *args: Any, **options: Any) -> None:
        plans = demo_plans().plans
        existing = set(Plan.objects.filter(slug__in=[plan.key for plan in plans]).values_list("slug", flat=True))
        try:
            # The same code as `quota_plans apply`, given only the plans still missing.
            apply_document(Document([plan for plan in plans if plan.key not in existing], []))
        except PlansFileError as exc:
            raise CommandError("\n".join(problem.render("demo/plans.yaml") for problem in exc.problems)) from None
        for item in plans:
            plan = Plan.objects.get(slug=item.key)
            sub, _ = Subscription.objects.get_or_create(name=f"Demo {plan.name} customer", defaults={"plan": plan})
            raw = demo_key(item.key)
            if not APIKey.objects.filter(key_hash=hash_api_key(raw)).exists():
                APIKey.issue(sub, name=f"demo-{item.key}", raw=raw)
            self.stdout.write(f"{item.key:<11} X-API-Key: {raw}")
