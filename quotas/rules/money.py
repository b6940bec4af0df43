"""Money as integer micro-units (1 unit of currency = 1,000,000): no floats anywhere."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

MICROS = 1_000_000


def to_micros(amount: Decimal | int | str) -> int:
    """``amount`` in micro-units, rounded half up; floats are refused (they cannot hold cents exactly)."""
    if isinstance(amount, bool | float):
        raise TypeError(f"Money must be a Decimal, an int or a str, not {type(amount).__name__} ({amount!r}).")
    value = Decimal(amount) * MICROS
    return int(value.to_integral_value(rounding=ROUND_HALF_UP))


def from_micros(micros: int) -> Decimal:
    """``micros`` as a Decimal amount with six decimal places."""
    return (Decimal(micros) / MICROS).quantize(Decimal("0.000001"))
