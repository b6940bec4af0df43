"""Parsing of rate strings such as ``"10/s; 100/min; 5000/day"``.

Each rate is ``<count>/<period>`` where the period is a unit, optionally
preceded by a multiplier: ``s``/``sec``/``second``, ``m``/``min``/``minute``,
``h``/``hour``, ``d``/``day``, ``w``/``week`` (plurals accepted), so
``"100/15min"`` means 100 per 15 minutes. DRF's own spelling (``"100/day"``,
``"5/hour"``) is a subset, so DRF rates parse unchanged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from quotas.exceptions import InvalidRate

UNIT_SECONDS: dict[str, int] = {
    "s": 1, "sec": 1, "second": 1,
    "m": 60, "min": 60, "minute": 60,
    "h": 3600, "hr": 3600, "hour": 3600,
    "d": 86400, "day": 86400,
    "w": 604800, "wk": 604800, "week": 604800,
}  # fmt: skip

_RATE_RE = re.compile(r"^\s*(\d+)\s*/\s*(\d*)\s*([a-z]+?)s?\s*$")
MAX_COUNT = 10**12
MAX_WINDOW = 366 * 86400


@dataclass(frozen=True, slots=True)
class Rate:
    """``limit`` units per ``window`` seconds."""

    limit: int
    window: int

    def __str__(self) -> str:
        for unit, name in ((86400, "day"), (3600, "hour"), (60, "min"), (1, "s")):
            if self.window % unit == 0:
                n = self.window // unit
                return f"{self.limit}/{'' if n == 1 else n}{name}"
        return f"{self.limit}/{self.window}s"  # pragma: no cover - every window divides by 1


def parse_rate(text: str) -> Rate:
    """Parse one ``count/period`` rate; raise :class:`InvalidRate` naming the problem."""
    match = _RATE_RE.match(text.lower())
    if not match:
        raise InvalidRate(
            f"{text.strip()!r} is not a rate: write <count>/<period>, for example '10/s', "
            "'100/min', '5000/day' or '100/15min'."
        )
    count_s, multiplier_s, unit = match.groups()
    if unit not in UNIT_SECONDS:
        raise InvalidRate(f"Unknown time unit {unit!r} in {text.strip()!r}: use s, min, hour, day or week.")
    count = int(count_s)
    multiplier = int(multiplier_s) if multiplier_s else 1
    if count <= 0:
        raise InvalidRate(f"The count in {text.strip()!r} must be at least 1.")
    if count > MAX_COUNT:
        raise InvalidRate(f"The count in {text.strip()!r} is larger than {MAX_COUNT}.")
    if multiplier <= 0:
        raise InvalidRate(f"The period in {text.strip()!r} must be at least 1 {unit}.")
    window = multiplier * UNIT_SECONDS[unit]
    if window > MAX_WINDOW:
        raise InvalidRate(f"The period in {text.strip()!r} is longer than 366 days.")
    return Rate(limit=count, window=window)


def parse_rates(text: str) -> tuple[Rate, ...]:
    """Parse ``"10/s; 100/min"`` into rates sorted by window, one per window length.

    Raises :class:`InvalidRate` for an empty string, a malformed part, or two
    rates with the same window (which one would apply is ambiguous).
    """
    if not isinstance(text, str) or not text.strip():
        raise InvalidRate("Enter at least one rate, for example '10/s; 100/min'.")
    parts = [p for p in re.split(r"[;,]", text) if p.strip()]
    rates = sorted((parse_rate(p) for p in parts), key=lambda r: r.window)
    seen: set[int] = set()
    for rate in rates:
        if rate.window in seen:
            raise InvalidRate(f"Two rates in {text.strip()!r} share the window of {rate.window} seconds; keep one.")
        seen.add(rate.window)
    return tuple(rates)
