"""The README's settings tables are the ones written from the settings' descriptions, so they cannot drift."""

from __future__ import annotations

import pytest

from config.settings_docs import MARKED_TABLE, README, TABLES, marked_tables, render
from quotas.setting import markdown_table


def readme() -> str:
    return README.read_text(encoding="utf-8")


def test_every_described_dict_has_one_table():
    """QUOTAS, its sections and QUOTAS['ADAPTIVE'] each have one marked table in the README."""
    assert sorted(marked_tables(readme())) == sorted(TABLES)


@pytest.mark.parametrize("name", sorted(TABLES))
def test_the_table_is_the_one_written_from_the_description(name):
    """After changing a setting's description, `make settings-docs` rewrites the table."""
    (written,) = [m.group(0) for m in MARKED_TABLE.finditer(readme()) if m.group(1) == name]
    settings, first = TABLES[name]
    assert written.split("\n", 1)[1] == markdown_table(settings, first), "run `make settings-docs`"


def test_rendering_the_readme_changes_nothing():
    text = readme()
    assert render(text) == text
