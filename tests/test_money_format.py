"""Money is written two ways, each by one function of quotas.formats.money: ``format_money`` for people ("5.00
USD") and ``api_amount`` for the API, problem bodies and events' data ("5.000000"). A scan of the product's code
finds no amount written any other way."""

from __future__ import annotations

import ast
import re
from decimal import Decimal
from pathlib import Path

import pytest

from quotas.formats.money import api_amount, format_money

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("quotas", "plans", "usage", "dashboard", "adaptive", "notifications", "console", "config", "demo")
#: The modules allowed to write money themselves: its owner; the template filters that call it (and give back
#: what is not a number unchanged); and the memory store, which answers micro-units as Redis's scripts do.
ALLOWED = {
    ROOT / "quotas" / "formats" / "money.py",
    ROOT / "dashboard" / "templatetags" / "glance.py",
    ROOT / "quotas" / "store" / "backends" / "memory" / "base.py",
}
#: Words naming money in an expression: a float format (":.2f") of one of these writes money by hand.
MONEY_WORDS = ("spent", "amount", "cost", "price", "revenue", "micros")
#: The two functions that write money.
WRITERS = ("format_money", "api_amount")


def product_files() -> list[Path]:
    return sorted(
        path
        for package in PRODUCT
        for path in (ROOT / package).rglob("*.py")
        if "migrations" not in path.parts and path not in ALLOWED
    )


def names_money(node: ast.expr) -> bool:
    """Whether an expression names an amount of money (``budget.amount``, ``cost_micros``; not ``capacity``),
    other than through one of the two writers."""
    if isinstance(node, ast.Call):  # a writer's text; else a helper of money's own (money(x)), or amount.normalize()
        name = getattr(node.func, "id", None) or getattr(node.func, "attr", "")
        if name in WRITERS:
            return False
        return name == "money" or names_money(node.func.value if isinstance(node.func, ast.Attribute) else node.func)
    if not isinstance(node, ast.Name | ast.Attribute | ast.Subscript):
        return False  # a constant, arithmetic
    words = set(re.split(r"[^a-z]+", ast.unparse(node).lower()))
    return bool(words & set(MONEY_WORDS))


def hand_written_money(path: Path, root: Path = ROOT) -> list[str]:
    """Where ``path`` writes an amount itself: a ``.quantize()``, ``str()`` of an amount (``from_micros()``'s
    or one named as money), or an amount put into an f-string as it is or with a format spec."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        where = f"{path.relative_to(root)}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "quantize":
            found.append(f"{where}: .quantize()")
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "str" and len(node.args) == 1:
            arg = node.args[0]
            if (isinstance(arg, ast.Call) and getattr(arg.func, "id", None) == "from_micros") or names_money(arg):
                found.append(f"{where}: str({ast.unparse(arg)})")
        # !r writes a value as Python reads it: an error naming a bad input, not an amount shown.
        if isinstance(node, ast.FormattedValue) and node.conversion != ord("r") and names_money(node.value):
            spec = ast.unparse(node.format_spec) if node.format_spec is not None else "as it is"
            found.append(f"{where}: {ast.unparse(node.value)} formatted {spec}")
    return found


def test_the_scan_finds_money_written_by_hand(tmp_path):
    """The scan is not empty-handed: each way of writing money by hand is found, and only those."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "a = f'{spent:.2f}'\nb = str(from_micros(micros))\nc = amount.quantize(Decimal('0.01'))\n"
        "d = f'{budget.amount} USD'\ne = str(plan.price)\nf = f'{amount.normalize():f}'\ng = f'{money(cap)}'\n"
        "ok = (f'{level:.2f}', f'{capacity:.0f}', f'{format_money(amount, cur)}', f'{amount!r}', api_amount(cost))\n"
    )
    found = hand_written_money(sample, root=tmp_path)
    assert sorted(f.split(":")[1] for f in found) == ["1", "2", "3", "4", "5", "6", "7"], found


@pytest.mark.parametrize("path", product_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_product_module_writes_money_itself(path):
    assert hand_written_money(path) == []


@pytest.mark.parametrize(
    ("amount", "text"),
    [(Decimal("5"), "5.000000"), (Decimal("0.000004"), "0.000004"), ("0.5", "0.500000"), (1234, "1234.000000"),
     (Decimal("0.0000005"), "0.000001")],
)  # fmt: skip
def test_the_api_writes_every_amount_with_six_places(amount, text):
    assert api_amount(amount) == text


@pytest.mark.parametrize(
    ("amount", "currency", "text"),
    [("5", "USD", "5.00 USD"), ("0.5", "USD", "0.50 USD"), ("1234.5", "JPY", "1,235 JPY"),
     ("0.000004", "USD", "0.000004 USD"), ("1.5", "KWD", "1.500 KWD")],
)  # fmt: skip
def test_people_read_amounts_in_the_currencys_minor_units_with_its_code(amount, currency, text):
    assert format_money(amount, currency) == text


#: ``{{ expression|filters }}`` in a template.
TEMPLATE_VALUE = re.compile(r"(value=\")?\{\{\s*([^}|]+?)\s*((?:\|[^}]*)?)\}\}")


def hand_written_template_money(path: Path) -> list[str]:
    """Where a template writes an amount without the ``money`` or ``micros`` filter (which call format_money). A
    form input's ``value`` is exempt: a number field takes the plain decimal."""
    found = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        for in_value, expression, filters in TEMPLATE_VALUE.findall(line):
            words = re.split(r"[^a-z]+", expression.lower())
            if in_value or words[-1] == "text" or not set(words) & set(MONEY_WORDS):
                continue
            if not re.search(r"\|(money|micros)\b", filters):
                found.append(f"{path.relative_to(ROOT)}:{number}: {{{{ {expression}{filters} }}}}")
    return found


def templates() -> list[Path]:
    return sorted(path for package in PRODUCT for path in (ROOT / package).rglob("*.html"))


@pytest.mark.parametrize("path", templates(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_template_writes_money_itself(path):
    assert hand_written_template_money(path) == []
