"""The settings reference's tables, written from the settings' descriptions.

Each table follows a ``<!-- settings table: NAME -->`` line in docs/settings.md;
``python -m config.settings_docs`` (``make settings-docs``) rewrites them from
:data:`quotas.settings.spec.SETTINGS` (the engine's settings and its sections)
and from the section each installed app registered (``QUOTAS['ADAPTIVE']`` from
``adaptive/conf.py``, ...: :mod:`quotas.settings.registry`), so the project's
settings (every app installed) are loaded first. tests/quotas/test_settings_docs.py
fails while one differs, or while a registered section has no table.
"""

from __future__ import annotations

import os
import re
import secrets
import sys
from collections.abc import Sequence
from pathlib import Path

import django

from quotas.settings import Setting, markdown_table
from quotas.settings.registry import registered
from quotas.settings.spec import SETTINGS

#: The settings reference page of the documentation site (mkdocs.yml).
SETTINGS_PAGE = Path(__file__).resolve().parent.parent / "docs" / "settings.md"


def tables() -> dict[str, tuple[Sequence[Setting], str]]:
    """Each table's name in its marker line -> the settings it lists, and the heading of its first column.

    ``QUOTAS`` lists the engine's settings, then a line for each app's section; then a table per section, the
    engine's first, then the apps' by name (whatever the order of INSTALLED_APPS).
    """
    sections = sorted((s.setting for s in registered()), key=lambda setting: setting.name)
    found: dict[str, tuple[Sequence[Setting], str]] = {"QUOTAS": ((*SETTINGS, *sections), "setting")}
    for section in (*(s for s in SETTINGS if s.keys), *sections):
        found[f"QUOTAS[{section.name!r}]"] = (section.keys, "key")
    return found


#: A marker line and the table rows right after it.
MARKED_TABLE = re.compile(r"^<!-- settings table: (.+?) -->\n(?:\|.*\|\n)*", re.MULTILINE)


def marked_tables(text: str) -> list[str]:
    """The names of the marked tables in ``text``, in order."""
    return [match.group(1) for match in MARKED_TABLE.finditer(text)]


def render(text: str) -> str:
    """``text`` with every marked table written afresh from its settings."""

    def table(match: re.Match[str]) -> str:
        settings, first = tables()[match.group(1)]
        return f"<!-- settings table: {match.group(1)} -->\n{markdown_table(settings, first)}"

    return MARKED_TABLE.sub(table, text)


def main() -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    # The project's settings need a key; this process signs nothing, so a random one does (as in the tests).
    os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))
    django.setup()  # each app registers its section in its ready()
    text = SETTINGS_PAGE.read_text(encoding="utf-8")
    name = "docs/settings.md"
    missing = set(tables()) - set(marked_tables(text))
    if missing:
        print(f"{name} has no marker for: {', '.join(sorted(missing))}", file=sys.stderr)
        return 1
    rendered = render(text)
    if rendered == text:
        print(f"{name}: the settings tables are up to date.")
    else:
        SETTINGS_PAGE.write_text(rendered, encoding="utf-8")
        print(f"{name}: the settings tables were rewritten.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
