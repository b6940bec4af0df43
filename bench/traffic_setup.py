"""``python -m bench.traffic_setup KEYS_FILE``: the traffic section's clients, in the HTTP bench database.

Run after :mod:`bench.http_setup` (which migrates), with ``config.settings``:
adds the ``traffic`` plan, one plan-wide limit of the three windows of
:data:`bench.rules.TRAFFIC_RATES` (a sliding window counter, the ``limits``
peer's algorithm), and :data:`bench.traffic.CLIENTS` subscriptions with one
API key each, and writes the raw keys to ``KEYS_FILE`` as a JSON list, the
busiest client's first.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
from decimal import Decimal
from pathlib import Path

import django

from .rules import TRAFFIC_LIMIT, TRAFFIC_RATES
from .traffic import CLIENTS


def main(keys_file: Path) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    from django.db import transaction

    from plans.models import APIKey, EndpointLimit, Plan, Subscription
    from plans.models.keys import API_KEY_PREFIX
    from quotas.identity.clients import hash_api_key

    with transaction.atomic():
        plan = Plan.objects.create(slug="traffic", name="Traffic", monthly_price=Decimal(0), priority=0)
        limit = EndpointLimit(
            plan=plan, name="global", rates="; ".join(TRAFFIC_RATES.values()), algorithm=TRAFFIC_LIMIT.algorithm
        )
        limit.full_clean()
        limit.save()
        subscriptions = Subscription.objects.bulk_create(
            Subscription(name=f"traffic client {i}", plan=plan) for i in range(CLIENTS)
        )
        raws = [API_KEY_PREFIX + secrets.token_urlsafe(32) for _ in subscriptions]
        APIKey.objects.bulk_create(
            APIKey(subscription=s, name="traffic", prefix=raw[:10], key_hash=hash_api_key(raw))
            for s, raw in zip(subscriptions, raws, strict=True)
        )
    keys_file.write_text(json.dumps(raws), encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
