"""docs/settings.md's tables are the ones written from the settings' descriptions, so they cannot drift."""

from __future__ import annotations

import pytest

from config.settings_docs import MARKED_TABLE, SETTINGS_PAGE, TABLES, marked_tables, render
from quotas.setting import markdown_table


def settings_page() -> str:
    return SETTINGS_PAGE.read_text(encoding="utf-8")


def test_every_described_dict_has_one_table():
    """QUOTAS, its sections and QUOTAS['ADAPTIVE'] each have one marked table in docs/settings.md."""
    assert sorted(marked_tables(settings_page())) == sorted(TABLES)


@pytest.mark.parametrize("name", sorted(TABLES))
def test_the_table_is_the_one_written_from_the_description(name):
    """After changing a setting's description, `make settings-docs` rewrites the table."""
    (written,) = [m.group(0) for m in MARKED_TABLE.finditer(settings_page()) if m.group(1) == name]
    settings, first = TABLES[name]
    assert written.split("\n", 1)[1] == markdown_table(settings, first), "run `make settings-docs`"


def test_rendering_the_settings_page_changes_nothing():
    text = settings_page()
    assert render(text) == text
