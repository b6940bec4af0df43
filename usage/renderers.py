"""CSV for spreadsheets: ``?format=csv`` on the usage report and its history."""

from __future__ import annotations

import csv
import io
from typing import Any

from rest_framework.renderers import BaseRenderer

from quotas.observability.history import HISTORY_COUNTERS

from .history import HISTORY_GROUPS

DENIED = ("rate", "budget", "acl", "capacity", "banned", "shadow")
COLUMNS = ("allowed", *(f"denied_{d}" for d in DENIED[:-1]), "shadow_would_deny", "weight", "cost")
#: group_by=minute|hour: the operators' rows (per plan and scope, every counter) and a client's own.
HISTORY_COLUMNS = ("start", "plan", "scope", *HISTORY_COUNTERS.values(), "denied", "total", "denial_rate")
CLIENT_HISTORY_COLUMNS = ("start", "allowed", "denied", "total", "denial_rate")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


class UsageCSVRenderer(BaseRenderer):
    """One line per report row (day, scope or bucket first), with a header line; totals are left to the
    spreadsheet."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        if not isinstance(data, dict) or "rows" not in data:
            return b""
        group = data["group_by"]
        out = io.StringIO()
        writer = csv.writer(out)
        if group in HISTORY_GROUPS:
            columns = CLIENT_HISTORY_COLUMNS if "client" in data else HISTORY_COLUMNS
            return _history(writer, columns, data["rows"], out).encode(self.charset)
        writer.writerow((group, *COLUMNS))
        for row in data["rows"]:
            counts = (row["denied"][d] for d in DENIED)
            writer.writerow((_cell(row[group]), row["allowed"], *counts, row["weight"], row["cost"]))
        return out.getvalue().encode(self.charset)


def _history(writer: Any, columns: tuple[str, ...], rows: list[dict[str, Any]], out: io.StringIO) -> str:
    """group_by=minute or hour: one line per bucket (the operators' per plan and scope, or a client's own)."""
    writer.writerow(columns)
    for row in rows:
        writer.writerow(_cell(row[c]) for c in columns)
    return out.getvalue()


def _cell(value: Any) -> str:
    # A text cell starting like a formula would be run by a spreadsheet (CSV injection).
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(_FORMULA_START) else text
