"""The adaptive panel's "signals of the latest change", as an operator reads them: each load signal the
controller saw, its value in the page's units, and why one is missing."""

from __future__ import annotations

from typing import Any

from django.db import connections

from adaptive.conf import FRACTION_SIGNALS, KNOWN_SIGNALS, adaptive_settings

LABELS = {"cpu": "CPU", "memory": "Memory", "db": "Database connections", "redis_ms": "Redis round trip"}


def signal_rows(signals: dict[str, Any]) -> list[dict[str, str]]:
    """One row per signal of a snapshot (``{"cpu": 0.0302, "db": None, ...}``): ``name``, ``value`` (a
    percentage, or milliseconds) and ``note`` (why there is no value)."""
    rows = []
    # In the order the settings name them, whatever order the database kept the keys in (jsonb sorts them).
    order = {name: n for n, name in enumerate(KNOWN_SIGNALS)}
    for name, value in sorted(signals.items(), key=lambda item: (order.get(item[0], len(order)), item[0])):
        if isinstance(value, int | float):
            text = f"{value * 100:.1f} %" if name in FRACTION_SIGNALS else f"{value:.1f} ms"
            rows.append({"name": LABELS.get(name, name), "value": text, "note": ""})
        else:
            rows.append({"name": LABELS.get(name, name), "value": "not measured", "note": _why_missing(name)})
    return rows


def _why_missing(name: str) -> str:
    if name not in adaptive_settings.SIGNALS:
        return "not among ADAPTIVE['SIGNALS']"
    if name != "db":
        return "no process reported it in the latest sample"
    database = connections["default"]
    if database.vendor != "postgresql":
        return f"measured on PostgreSQL only; this database is {database.vendor}"
    if not database.settings_dict.get("OPTIONS", {}).get("pool") and not adaptive_settings.DB_SERVER_SIGNAL:
        return "no connection pool (OPTIONS['pool']) and ADAPTIVE['DB_SERVER_SIGNAL'] off"
    return "unreadable in the latest sample (the controller's log says why)"
