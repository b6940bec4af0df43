"""Money as integer micro-units (1 unit of currency = 1,000,000): no floats anywhere."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Context, Decimal

MICROS = 1_000_000
#: The context money is converted in, whatever the thread's decimal context is: enough digits for any amount
#: (a project that lowered its own precision must not charge 1234.567891 as 1,234,570,000 micro-units), and
#: half-up rounding, one way everywhere (prices saved through the ORM too: plans.models).
MONEY_CONTEXT = Context(prec=50, rounding=ROUND_HALF_UP)
#: One micro-unit as a Decimal: the smallest amount money is counted in.
MICRO = Decimal("0.000001")


def to_micros(amount: Decimal | int | str) -> int:
    """``amount`` in micro-units, rounded half up; floats are refused (they cannot hold cents exactly)."""
    if isinstance(amount, bool | float):
        raise TypeError(f"Money must be a Decimal, an int or a str, not {type(amount).__name__} ({amount!r}).")
    value = MONEY_CONTEXT.multiply(Decimal(amount), MICROS)
    return int(value.to_integral_value(rounding=ROUND_HALF_UP, context=MONEY_CONTEXT))


def round_money(amount: Decimal) -> Decimal:
    """``amount`` rounded half up to whole micro-units, as :func:`to_micros` charges it."""
    return amount.quantize(MICRO, context=MONEY_CONTEXT)


def from_micros(micros: int) -> Decimal:
    """``micros`` as a Decimal amount with six decimal places."""
    return MONEY_CONTEXT.divide(Decimal(micros), MICROS).quantize(MICRO, context=MONEY_CONTEXT)


def api_amount(amount: Decimal | int | str) -> str:
    """``amount`` as the API, problem bodies and events' data write money: a decimal string with six places,
    whatever the currency ("5.000000", "0.000004").

    Six places are the ledger's micro-units, the smallest amount it charges: a request priced at 0.000004 must
    not read as 0.00 where the spend it adds up to is reported. A string, not a JSON number, so no client
    parses it into a float. People read amounts through :func:`format_money` instead.
    """
    return str(round_money(Decimal(amount)))


#: ISO 4217 currencies whose minor unit is not the hundredth; every other code is shown with 2 decimals.
_ZERO_DECIMALS = ("BIF", "CLP", "DJF", "GNF", "ISK", "JPY", "KMF", "KRW", "PYG", "RWF", "UGX", "UYI", "VND", "VUV")
_MINOR_UNITS = {
    **dict.fromkeys((*_ZERO_DECIMALS, "XAF", "XOF", "XPF"), 0),
    **dict.fromkeys(("BHD", "IQD", "JOD", "KWD", "LYD", "OMR", "TND"), 3),
    **dict.fromkeys(("CLF", "UYW"), 4),
}


def minor_units(currency: str) -> int:
    """The decimals ``currency`` (an ISO 4217 code) is usually written with: 2 for most, 0 for JPY, 3 for KWD..."""
    return _MINOR_UNITS.get(currency.upper(), 2)


def format_money(amount: Decimal | int | str, currency: str = "") -> str:
    """``amount`` as people read it: thousands grouped, the currency's usual decimals, then its code.

    ``format_money("1234.5", "USD")`` is "1,234.50 USD", ``("1234.5", "JPY")``
    "1,235 JPY". An amount that is not zero but would round to zero (a
    request priced at a tenth of a cent) keeps the decimals it needs, up to
    six, rather than read as nothing spent. Without a currency: 2 decimals, no code.
    """
    value = Decimal(amount)
    places = minor_units(currency) if currency else 2
    rounded = value.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
    if rounded == 0 and value != 0:
        rounded = value.quantize(Decimal("0.000001"), rounding=ROUND_HALF_UP).normalize()
        exponent = rounded.as_tuple().exponent  # an int: "n", "N" and "F" are NaN and infinity's
        if isinstance(exponent, int):
            places = max(places, -exponent)
    text = f"{rounded:,.{places}f}"
    return f"{text} {currency.upper()}" if currency else text
