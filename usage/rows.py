"""The one shape of a usage row, whatever the mode (day, scope, minute, hour, a client's own history).

Every row holds its group (``day``, ``scope``, or ``start`` with ``plan`` and ``scope``) and these counters:

* ``allowed``: requests admitted; ``denied``: requests refused, for every reason; ``total``: both;
  ``denial_rate``: denied / total (0.0 when nothing was decided);
* ``denied_by``: the refusals by reason (:data:`DENIED_BY`), or None where only the totals are kept (a
  client's own history); a reason a mode does not count apart is None (the daily usage counts a refusal a
  process made from its memory of the client under its reason, so ``local`` is None there);
* ``shadow_would_deny``: requests admitted that a shadow limit would have refused (admitted, so not among
  ``denied``), None where not kept;
* ``weight`` and ``cost`` (a decimal string, exact): the daily usage's, None in the history.

The CSV columns (:data:`COUNTER_COLUMNS`) are the same counters, flattened.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: The reasons of ``denied_by``, in the order of the CSV columns.
DENIED_BY = ("rate", "budget", "acl", "capacity", "banned", "local")
#: The counter columns of every CSV, after the row's group.
COUNTER_COLUMNS = (
    "allowed", "denied", *(f"denied_by_{reason}" for reason in DENIED_BY), "shadow_would_deny", "total",
    "denial_rate", "weight", "cost",
)  # fmt: skip


def counters(
    allowed: int,
    denied_by: Mapping[str, int | None] | None,
    *,
    denied: int | None = None,
    shadow_would_deny: int | None = None,
    weight: int | None = None,
    cost: str | None = None,
) -> dict[str, Any]:
    """A row's counters. ``denied`` defaults to the sum of ``denied_by``; a reason missing from it is None."""
    by = None if denied_by is None else {reason: denied_by.get(reason) for reason in DENIED_BY}
    if denied is None:
        denied = sum(n for n in (by or {}).values() if n)
    total = allowed + denied
    return {
        "allowed": allowed,
        "denied": denied,
        "denied_by": by,
        "shadow_would_deny": shadow_would_deny,
        "total": total,
        "denial_rate": round(denied / total, 6) if total else 0.0,
        "weight": weight,
        "cost": cost,
    }


def flat(row: dict[str, Any]) -> dict[str, Any]:
    """A row's counters as the CSV columns name them (``denied_by`` spread into ``denied_by_<reason>``)."""
    by = row.get("denied_by") or {}
    return {**row, **{f"denied_by_{reason}": by.get(reason) for reason in DENIED_BY}}
