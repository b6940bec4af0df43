"""The page's figures of spend: for each budget, cap and key cap, what its current period spent, its amount, what
is left, its state (ok, near from 80 %, reached) and when it resets, read from the ledger without counting
(:mod:`console.spend`). Amounts read as people read money (:func:`quotas.formats.money.format_money`), a reset
as a date and time with its zone: the page's (``TIME_ZONE``) as the server writes it, the browser's own once
the page's small script has rewritten it (without JavaScript the server's stays, zone named)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.utils import timezone

from plans.models import APIKey, Subscription
from quotas.formats.money import format_money

from ..caps import Period
from ..spend import Spend, key_spend

#: How the page writes a moment before the browser rewrites it in its own zone.
MOMENT = "%Y-%m-%d %H:%M"


@dataclass(frozen=True, slots=True)
class SpendRow:
    """One row of the page's spend table."""

    id: str  # what the row is, for tests and links: "day-budget", "day-cap", "key-<prefix>-day-cap"
    label: str
    spent_text: str  # each amount as people read it (format_money)
    amount_text: str
    remaining_text: str
    state: str
    resets_at: datetime
    resets_text: str


def moment(at: datetime) -> str:
    """``at`` as the page writes it: in the page's time zone, the zone named (``2026-11-30 00:00 UTC``)."""
    local = timezone.localtime(at)
    return f"{local.strftime(MOMENT)} {local.tzname()}"


def spend_rows(periods: list[Period], keys: list[APIKey], spent_by_key: dict[int, Spend] | None) -> list[SpendRow]:
    """The rows of the spend table: each period's budget and the cap that lowers it (one spend, two amounts),
    then each key's own cap."""
    rows = []
    for p in periods:
        if p.spend is None:
            continue
        if p.budget is not None:
            rows.append(_row(f"{p.period}-budget", f"Plan's {p.period} budget", p.spend, p.budget, p.currency))
        if p.cap is not None:
            label = f"Your {p.period} cap" + (" (enforced as a budget of its own)" if p.budget is None else "")
            rows.append(_row(f"{p.period}-cap", label, p.spend, p.cap, p.currency))
    for key in keys:
        spend = (spent_by_key or {}).get(key.pk)
        if spend is not None and key.cap_amount is not None:
            label = f"Key {key.name or 'no name'} ({key.prefix}…): its {key.cap_period} cap"
            rows.append(_row(f"key-{key.prefix}-{key.cap_period}-cap", label, spend, key.cap_amount, spend.currency))
    return rows


def spend_context(subscription: Subscription, periods: list[Period], keys: list[APIKey]) -> dict[str, Any]:
    """What the page's spend table and key list need: ``spend_rows``, ``key_spend`` (key id -> its cap's row)
    and ``spend_unread`` (True when the ledger could not be read: the page says so rather than show zeros)."""
    spent_by_key = key_spend(subscription, keys)
    rows = spend_rows(periods, keys, spent_by_key)
    unread = spent_by_key is None or any(p.spend is None for p in periods)
    by_key = {}
    for key in keys:
        found = [r for r in rows if r.id == f"key-{key.prefix}-{key.cap_period}-cap"]
        if found:
            by_key[key.pk] = found[0]
    return {"spend_rows": rows, "key_spend": by_key, "spend_unread": unread}


def _row(row_id: str, label: str, spend: Spend, amount: Decimal, currency: str) -> SpendRow:
    return SpendRow(
        id=row_id,
        label=label,
        spent_text=format_money(spend.spent, currency),
        amount_text=format_money(amount, currency),
        remaining_text=format_money(spend.remaining_of(amount), currency),
        state=spend.state_of(amount),
        resets_at=spend.resets_at,
        resets_text=moment(spend.resets_at),
    )
