"""CSV for spreadsheets: ``?format=csv`` on the usage report."""

from __future__ import annotations

import csv
import io
from typing import Any

from rest_framework.renderers import BaseRenderer

DENIED = ("rate", "budget", "acl", "capacity", "banned", "shadow")
COLUMNS = ("allowed", *(f"denied_{d}" for d in DENIED[:-1]), "shadow_would_deny", "weight", "cost")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


class UsageCSVRenderer(BaseRenderer):
    """One line per report row (day or scope first), with a header line; totals are left to the spreadsheet."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        if not isinstance(data, dict) or "rows" not in data:
            return b""
        group = data["group_by"]
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow((group, *COLUMNS))
        for row in data["rows"]:
            counts = (row["denied"][d] for d in DENIED)
            writer.writerow((_cell(row[group]), row["allowed"], *counts, row["weight"], row["cost"]))
        return out.getvalue().encode(self.charset)


def _cell(value: Any) -> str:
    # A text cell starting like a formula would be run by a spreadsheet (CSV injection).
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(_FORMULA_START) else text
