"""CSV for spreadsheets: ``?format=csv`` on the usage report and its history."""

from __future__ import annotations

import csv
import io
from typing import Any

from rest_framework.renderers import BaseRenderer

from .history import HISTORY_GROUPS
from .rows import COUNTER_COLUMNS, flat

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


class UsageCSVRenderer(BaseRenderer):
    """One line per report row, with a header line: the row's group (day, scope, or start with plan and scope,
    or start alone for a client's own history), then the counters every mode shares (:mod:`usage.rows`);
    totals are left to the spreadsheet."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        if not isinstance(data, dict) or "rows" not in data:
            return b""
        group = data["group_by"]
        if group not in HISTORY_GROUPS:
            groups: tuple[str, ...] = (group,)
        else:
            groups = ("start",) if "client" in data else ("start", "plan", "scope")
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow((*groups, *COUNTER_COLUMNS))
        for row in data["rows"]:
            cells = flat(row)
            writer.writerow(_cell(cells[column]) for column in (*groups, *COUNTER_COLUMNS))
        return out.getvalue().encode(self.charset)


def _cell(value: Any) -> str:
    # A text cell starting like a formula would be run by a spreadsheet (CSV injection).
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(_FORMULA_START) else text
