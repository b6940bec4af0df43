"""The adaptive panel's "signals of the latest change", as an operator reads them: each load signal the
controller saw, its value in the page's units, why one is missing, and the planned capacity of the schedule."""

from __future__ import annotations

from typing import Any

from django.db import connections

from adaptive.conf import FRACTION_SIGNALS, HOOK_SIGNAL, KNOWN_SIGNALS, adaptive_settings

LABELS: dict[str, str] = {
    "cpu": "CPU",
    "memory": "Memory",
    "db": "Database connections",
    "redis_ms": "Redis round trip",
    "latency": "Response time (p90)",
    "errors": "Server errors (5xx)",
    HOOK_SIGNAL: "Project signal (LOAD_HOOK)",
}
#: Signals that are load figures (1.0 = at their target), shown as a share of it.
TARGETED = ("latency", "errors", HOOK_SIGNAL)


#: Why a signal other than ``db`` has no value in a snapshot.
_MISSING = {
    "latency": "no process served ADAPTIVE['MIN_RESPONSES'] responses in its latest interval",
    "errors": "no process served ADAPTIVE['MIN_RESPONSES'] responses in its latest interval",
    HOOK_SIGNAL: "ADAPTIVE['LOAD_HOOK'] unset, failing or not a number (the controller's log says why)",
}


def signal_rows(signals: dict[str, Any]) -> list[dict[str, str]]:
    """One row per signal of a snapshot: ``name``, ``value`` (a percentage, milliseconds or a share of the
    target) and ``note`` (why there is no value), then the planned capacity when a schedule is set.

    ``signals`` is what the controller stores (``{"observed": {"cpu": 0.0302, "db": None, ...}, "measured":
    {"latency_ms": ...}, "planned": {...}, ...}``); a flat ``{"cpu": 0.0302, ...}`` reads as its ``observed``.
    """
    nested = signals.get("observed")
    observed = nested if isinstance(nested, dict) else signals
    measured = signals.get("measured")
    measured = measured if isinstance(measured, dict) else {}
    rows: list[dict[str, str]] = []
    # In the order the settings name them, whatever order the database kept the keys in (jsonb sorts them).
    order = {name: n for n, name in enumerate(KNOWN_SIGNALS)}
    for name, value in sorted(observed.items(), key=lambda item: (order.get(item[0], len(order)), item[0])):
        label = LABELS.get(str(name), str(name))
        if isinstance(value, int | float) and not isinstance(value, bool):
            rows.append({"name": label, "value": _value(name, float(value), measured), "note": ""})
        else:
            rows.append({"name": label, "value": "not measured", "note": _why_missing(name)})
    planned = signals.get("planned")
    if isinstance(planned, dict) and isinstance(planned.get("capacity"), int | float):
        share, window = f"{planned['capacity'] * 100:.0f} %", str(planned.get("by", ""))
        rows.append({"name": "Planned capacity", "value": share, "note": window})
    return rows


def _value(name: str, value: float, measured: dict[str, Any]) -> str:
    if name in FRACTION_SIGNALS:
        return f"{value * 100:.1f} %"
    if name not in TARGETED:
        return f"{value:.1f} ms"
    share = f"{value * 100:.0f} % of target"
    latency_ms, error_rate = measured.get("latency_ms"), measured.get("error_rate")
    if name == "latency" and isinstance(latency_ms, int | float):
        return f"{latency_ms:.0f} ms, {share}"
    if name == "errors" and isinstance(error_rate, int | float):
        return f"{error_rate * 100:.2f} % of responses, {share}"
    return share


def _why_missing(name: str) -> str:
    if name not in adaptive_settings.SIGNALS:
        return "not among ADAPTIVE['SIGNALS']"
    if name != "db":
        return _MISSING.get(name, "no process reported it in the latest sample")
    database = connections["default"]
    if database.vendor != "postgresql":
        return f"measured on PostgreSQL only; this database is {database.vendor}"
    if not database.settings_dict.get("OPTIONS", {}).get("pool") and not adaptive_settings.DB_SERVER_SIGNAL:
        return "no connection pool (OPTIONS['pool']) and ADAPTIVE['DB_SERVER_SIGNAL'] off"
    return "unreadable in the latest sample (the controller's log says why)"
