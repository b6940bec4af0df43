"""manage.py issue_key --plan SLUG [--name NAME] [--subscription ID] [--expires WHEN]"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

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
            help="When the key stops working: a duration (30d, 12h, 90m) or an ISO date or date-time "
            "(2027-01-31, 2027-01-31T18:00:00+01:00; without a zone, the project's TIME_ZONE). Default: never.",
        )

    @transaction.atomic
    def handle(
        self, *args: Any, plan: str | None, name: str, subscription: int | None, expires: str | None, **options: Any
    ) -> None:
        expires_at = parse_expiry(expires, timezone.now()) if expires else None
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


_DURATION = re.compile(r"(\d{1,6})([dhm])")
_UNITS = {"d": "days", "h": "hours", "m": "minutes"}


def parse_expiry(value: str, now: datetime) -> datetime:
    """``value`` (a duration such as 30d, or an ISO date or date-time) as an aware moment after ``now``."""
    text = value.strip()
    duration = _DURATION.fullmatch(text)
    try:
        if duration:
            moment = now + timedelta(**{_UNITS[duration[2]]: int(duration[1])})
        elif (day := parse_date(text)) is not None:
            moment = timezone.make_aware(datetime(day.year, day.month, day.day))
        elif (parsed := parse_datetime(text)) is not None:
            moment = parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed)
        else:
            raise ValueError("not a duration, date or date-time")
    except (ValueError, OverflowError) as exc:
        raise CommandError(f"--expires {value!r}: {exc}. Use e.g. 30d, 12h, 2027-01-31 or 2027-01-31T18:00.") from None
    if moment <= now:
        raise CommandError(f"--expires {value!r} is in the past ({moment.isoformat(timespec='seconds')}).")
    return moment
