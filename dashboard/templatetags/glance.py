"""Template filters for values read at a glance: durations, money, and times in the viewer's time zone.

``{{ seconds|in_duration }}`` gives "in 11 h 56 min"; ``{{ n|count }}`` "1,234"; ``{{ ratio|times }}``
"10 times"; ``{{ amount|money:currency }}``
"1,234.50 USD" (see :func:`quotas.formats.money.format_money`); ``{{ when|local_time }}``
a ``<time>`` element that ``dashboard/glance.js`` rewrites in the viewer's
time zone, with the UTC time kept as its title (shown on hover) and as the
text when JavaScript is off.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from django import template
from django.utils.html import format_html

from quotas.formats.money import format_money, from_micros

register = template.Library()

_UNITS = (("d", 86_400), ("h", 3_600), ("min", 60), ("s", 1))
#: Units a duration is shown in: the two largest.
_UNITS_SHOWN = 2
#: From this factor up, "times" shows whole numbers only.
_WHOLE_TIMES = 10


def format_duration(seconds: float) -> str:
    """``seconds`` in its two largest units, the rest dropped as a clock does: "11 h 56 min", "3 d 4 h", "42 s"."""
    left = max(0, int(-(-float(seconds) // 1)))
    parts: list[str] = []
    for name, size in _UNITS:
        if left >= size or (name == "s" and not parts):
            count, left = divmod(left, size)
            parts.append(f"{count} {name}")
        if len(parts) == _UNITS_SHOWN:
            break
    return " ".join(parts)


@register.filter
def in_duration(seconds: Any) -> str:
    """ "in 11 h 56 min"; "now" for nothing left; the value unchanged when it is not a number."""
    try:
        value = float(seconds)
    except (TypeError, ValueError):
        return str(seconds)
    return "now" if value <= 0 else f"in {format_duration(value)}"


_NAMED_WINDOWS = {1: "second", 60: "minute", 3600: "hour", 86_400: "day", 604_800: "week"}


@register.filter
def per_window(seconds: Any) -> str:
    """A window's length after "per": "minute" for 60, "day" for 86400, "30 s" or "2 h" otherwise."""
    try:
        value = int(seconds)
    except (TypeError, ValueError):
        return str(seconds)
    return _NAMED_WINDOWS.get(value) or format_duration(value)


@register.filter
def money(amount: Any, currency: str = "") -> str:
    """``amount`` with ``currency``'s usual decimals and its code; the value unchanged when it is not a number."""
    try:
        return format_money(Decimal(str(amount)), currency or "")
    except (InvalidOperation, ValueError):
        return str(amount)


@register.filter
def micros(amount: Any, currency: str = "") -> str:
    """An amount in micro-units (as budgets are stored) as :func:`money` writes it."""
    try:
        return format_money(from_micros(int(amount)), currency or "")
    except (TypeError, ValueError):
        return str(amount)


@register.filter
def count(value: Any) -> str:
    """A whole number with thousands separators ("1,234"); the value unchanged when it is not a number."""
    try:
        return f"{int(value):,}"
    except (TypeError, ValueError):
        return str(value)


@register.filter
def times(factor: Any) -> str:
    """A ratio as "10 times" (whole from 10 up, one decimal below: "2.5 times"); unchanged when not a number."""
    try:
        value = float(factor)
    except (TypeError, ValueError):
        return str(factor)
    return f"{value:,.0f} times" if value >= _WHOLE_TIMES or value == int(value) else f"{value:.1f} times"


@register.filter
def local_time(value: Any) -> str:
    """A ``<time>`` element for ``value`` (an aware datetime or ISO 8601 text), shown in UTC until glance.js runs."""
    if value in (None, ""):
        return "—"
    when = value if isinstance(value, datetime) else _parse(str(value))
    if when is None:
        return str(value)
    utc = when.astimezone(UTC) if when.tzinfo else when.replace(tzinfo=UTC)
    text = utc.strftime("%Y-%m-%d %H:%M:%S UTC")
    return format_html('<time datetime="{}" title="{}" data-local>{}</time>', utc.isoformat(), text, text)


def _parse(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None
