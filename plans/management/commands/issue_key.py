"""manage.py issue_key --plan SLUG [--name NAME] [--subscription ID] [--expires WHEN]"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.utils import timezone

from plans.expiry import EXAMPLES, parse_expiry
from plans.models import APIKey, Plan, Subscription


class Command(BaseCommand):
    help = (
        "Issue an API key on a plan (a new subscription), or another key for an existing "
        "subscription. The raw key is printed once, alone on the last line."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--plan", help="Slug of the plan for a new subscription.")
        parser.add_argument("--name", default="", help="Who the key is for.")
        parser.add_argument("--subscription", type=int, help="Add the key to this subscription instead.")
        parser.add_argument(
            "--expires",
            help=f"When the key stops working: a duration or an ISO date or date-time ({EXAMPLES}; "
            "without a zone, the project's TIME_ZONE). Default: never.",
        )

    @transaction.atomic
    def handle(
        self, *args: Any, plan: str | None, name: str, subscription: int | None, expires: str | None, **options: Any
    ) -> None:
        expires_at = None
        if expires:  # empty, as before: no expiry
            try:
                expires_at = parse_expiry(expires, timezone.now())
            except ValueError as exc:
                raise CommandError(f"--expires {expires!r}: {exc}.") from None
        if subscription is not None:
            try:
                sub = Subscription.objects.select_related("plan").get(pk=subscription)
            except Subscription.DoesNotExist:
                raise CommandError(f"No subscription with id {subscription}.") from None
        else:
            if not plan:
                raise CommandError("Give --plan <slug> (or --subscription <id>).")
            try:
                plan_obj = Plan.objects.get(slug=plan)
            except Plan.DoesNotExist:
                known = ", ".join(Plan.objects.values_list("slug", flat=True)) or "none yet"
                raise CommandError(f"No plan {plan!r}. Known plans: {known}.") from None
            sub = Subscription.objects.create(name=name or f"{plan_obj.slug} client", plan=plan_obj)
        key, raw = APIKey.issue(sub, name=name, expires_at=expires_at)
        until = f", valid until {expires_at.isoformat(timespec='seconds')}" if expires_at else ""
        self.stdout.write(
            f"Issued key {key.prefix}… for subscription #{sub.pk} ({sub.name}) on plan {sub.plan.slug}{until}."
        )
        self.stdout.write("Store it now; it cannot be shown again:")
        self.stdout.write(raw)
