"""docs/settings.md's tables are the ones written from the settings' descriptions, so they cannot drift."""

from __future__ import annotations

import pytest

from adaptive.conf import SECTION as ADAPTIVE
from config.settings_docs import MARKED_TABLE, SETTINGS_PAGE, marked_tables, render, tables
from notifications.conf import SECTION as NOTIFICATIONS
from plans.conf import SECTION as ACL_FEEDS
from quotas.settings import markdown_table


def settings_page() -> str:
    return SETTINGS_PAGE.read_text(encoding="utf-8")


def test_every_described_dict_has_one_table():
    """QUOTAS, its sections and the section each app registered each have one marked table in docs/settings.md."""
    assert sorted(marked_tables(settings_page())) == sorted(tables())


def test_each_apps_section_is_listed_from_the_app():
    """The tables of the apps' sections are written from what each app registered, and QUOTAS's lists them."""
    for name, section in (("ADAPTIVE", ADAPTIVE), ("NOTIFICATIONS", NOTIFICATIONS), ("ACL_FEEDS", ACL_FEEDS)):
        assert tables()[f"QUOTAS[{name!r}]"] == (section.setting.keys, "key")
        assert section.setting in tables()["QUOTAS"][0]


@pytest.mark.parametrize("name", sorted(tables()))
def test_the_table_is_the_one_written_from_the_description(name):
    """After changing a setting's description, `make settings-docs` rewrites the table."""
    (written,) = [m.group(0) for m in MARKED_TABLE.finditer(settings_page()) if m.group(1) == name]
    settings, first = tables()[name]
    assert written.split("\n", 1)[1] == markdown_table(settings, first), "run `make settings-docs`"


def test_rendering_the_settings_page_changes_nothing():
    text = settings_page()
    assert render(text) == text
