"""The README's settings tables name every setting quotas and adaptive read, nested keys included."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from adaptive.conf import DEFAULTS as ADAPTIVE_DEFAULTS
from quotas.conf import DEFAULTS, SECTIONS

README = Path(__file__).resolve().parents[2] / "README.md"


def settings_section() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("## Settings (`QUOTAS` in Django settings)")
    return text[start : text.index("\n## ", start + 1)]


def first_cells(text: str) -> set[str]:
    """The names in backticks in the first cell of every table row."""
    cells = re.findall(r"^\|([^|]*)\|", text, flags=re.MULTILINE)
    return {name for cell in cells for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", cell)}


def nested_table(section: str) -> set[str]:
    """The rows of the table that follows the line naming ``QUOTAS['<section>']``."""
    text = settings_section()
    start = text.index(f"`QUOTAS['{section}']`")
    table = re.search(r"(^\|.*\|\n)+", text[start:], flags=re.MULTILINE)
    assert table, f"no table after QUOTAS['{section}']"
    return first_cells(table.group(0))


def test_every_top_level_setting_has_a_row():
    assert set(DEFAULTS) - first_cells(settings_section()) == set()


@pytest.mark.parametrize("section", [*SECTIONS, "ADAPTIVE"])
def test_every_nested_key_has_a_row(section):
    known = ADAPTIVE_DEFAULTS if section == "ADAPTIVE" else DEFAULTS[section]
    assert set(known) == nested_table(section)
