"""The settings reference's tables, written from the settings' descriptions.

Each table follows a ``<!-- settings table: NAME -->`` line in docs/settings.md;
``python -m config.settings_docs`` (``make settings-docs``) rewrites them from
:data:`quotas.settings_spec.SETTINGS`, :data:`adaptive.conf.SETTINGS`, :data:`notifications.conf.SETTINGS` and
:data:`plans.conf.SETTINGS`, and
tests/quotas/test_settings_docs.py fails while one differs. It lives with the
project because the tables cover two apps, and quotas may not import adaptive.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from pathlib import Path

from adaptive.conf import SETTINGS as ADAPTIVE_SETTINGS
from notifications.conf import SETTINGS as NOTIFICATION_SETTINGS
from plans.conf import SETTINGS as FEED_SETTINGS
from quotas.setting import Setting, markdown_table
from quotas.settings_spec import ALLOWANCES, METRICS, RETENTION, SETTINGS, USAGE_FLUSH

#: The settings reference page of the documentation site (mkdocs.yml).
SETTINGS_PAGE = Path(__file__).resolve().parent.parent / "docs" / "settings.md"
#: Each table's name in its marker line -> the settings it lists, and the heading of its first column.
TABLES: dict[str, tuple[Sequence[Setting], str]] = {
    "QUOTAS": (SETTINGS, "setting"),
    "QUOTAS['METRICS']": (METRICS, "key"),
    "QUOTAS['USAGE_FLUSH']": (USAGE_FLUSH, "key"),
    "QUOTAS['RETENTION']": (RETENTION, "key"),
    "QUOTAS['ALLOWANCES']": (ALLOWANCES, "key"),
    "QUOTAS['ADAPTIVE']": (ADAPTIVE_SETTINGS, "key"),
    "QUOTAS['NOTIFICATIONS']": (NOTIFICATION_SETTINGS, "key"),
    "QUOTAS['ACL_FEEDS']": (FEED_SETTINGS, "key"),
}
#: A marker line and the table rows right after it.
MARKED_TABLE = re.compile(r"^<!-- settings table: (.+?) -->\n(?:\|.*\|\n)*", re.MULTILINE)


def marked_tables(text: str) -> list[str]:
    """The names of the marked tables in ``text``, in order."""
    return [match.group(1) for match in MARKED_TABLE.finditer(text)]


def render(text: str) -> str:
    """``text`` with every marked table written afresh from its settings."""

    def table(match: re.Match[str]) -> str:
        settings, first = TABLES[match.group(1)]
        return f"<!-- settings table: {match.group(1)} -->\n{markdown_table(settings, first)}"

    return MARKED_TABLE.sub(table, text)


def main() -> int:
    text = SETTINGS_PAGE.read_text(encoding="utf-8")
    name = "docs/settings.md"
    missing = set(TABLES) - set(marked_tables(text))
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
