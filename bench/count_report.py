"""Section 13's table: instructions per decision under cachegrind (the figures of :mod:`bench.count`)."""

from __future__ import annotations

from typing import Any

from .tables import table

TITLE = "13. CPU instructions per decision, counted by cachegrind (client process only)"
#: The rows, in the order printed.
LABELS = {
    "no_throttle": "no throttle (baseline)",
    "limits_1": "limits sliding window counter, 1 hit()",
    "limits_5": "limits, 5 hit()s for 5 windows",
    "quota_1": "QuotaThrottle, 1 limit (cold: a new user each request)",
    "quota_5": "QuotaThrottle, 5 limits (cold)",
    "quota_1_busy": "busy client, QuotaThrottle 1 limit",
    "quota_5_busy": "busy client, QuotaThrottle 5 limits",
    "limits_busy": "busy client, limits 1 hit()",
}
HEADERS = (
    "workload", "instructions per decision", "own (minus no throttle)", "own / limits' own",
    "Redis script calls per decision",
)  # fmt: skip


def count_section(count: dict[str, Any]) -> str:
    """The section's title, table and how to read it; one line when it was skipped."""
    if "skipped" in count:
        return f"{TITLE}: skipped, {count['skipped']}"
    rows = count["rows"]
    body = []
    for key, label in LABELS.items():
        row = rows[key]
        own = f"{row['own']:,}" if "own" in row else ""
        ratio = f"{row['own_vs_limits']:.2f}x" if row.get("own_vs_limits") is not None else ""
        body.append((label, f"{row['instructions_per_decision']:,}", own, ratio,
                     f"{row['script_calls_per_decision']:.3f}"))  # fmt: skip
    five = rows["quota_5"]["own"] / rows["limits_5"]["own"]
    note = (
        f"(per decision = (Ir of W + N decisions - Ir of W) / N, W = {count['warmup']:,}, N = {count['decisions']:,}; "
        "cold rows divided by limits' 1 hit(), busy rows by limits' busy row;\n"
        f" QuotaThrottle 5 limits / limits' 5 hit()s: {five:.2f}x; busy: one user far below 1,000,000/min, served "
        "mostly from local allowances;\n script calls: INFO commandstats around the last N requests, the engine's "
        f"background work included; {count['valgrind']}, {count['seconds']:.0f} s)"
    )
    trace = count.get("trace")
    traced = (
        f"cold decision: {trace['modules']} modules, {trace['functions']} functions, {trace['calls']} calls "
        "(product code from QuotaThrottle.allow_request to the headers, comprehensions apart; bench/count_trace.py)\n"
        if trace
        else ""
    )
    return f"{TITLE}\n{table(HEADERS, body)}\n{traced}{note}"
