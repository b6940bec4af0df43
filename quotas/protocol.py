"""The contract between the Python engine and its Lua scripts: one owner for what both sides must agree on.

The algorithms travel as numbers in the window specs; the scripts get their
names as Lua constants generated from :class:`Algorithm` when they are
assembled (:func:`lua_constants`, prepended by :func:`quotas.scripts.script_source`),
so a number can change here and nowhere else. ``tests/quotas/test_protocol.py``
runs the generated constants in Redis and compares.
"""

from __future__ import annotations

import json
import logging
import math
from enum import IntEnum

logger = logging.getLogger(__name__)


class Algorithm(IntEnum):
    """Every algorithm the decision script knows, by its wire code."""

    FIXED_WINDOW = 1
    SLIDING_WINDOW_LOG = 2
    SLIDING_WINDOW_COUNTER = 3
    TOKEN_BUCKET = 4
    LEAKY_BUCKET = 5
    PERIOD_QUOTA = 6  # weight units per calendar period
    BUDGET = 7  # money (micro-units) per calendar period
    PERIOD_REQUESTS = 8  # requests per calendar period
    CONCURRENCY = 9  # requests in flight, each holding a lease

    @classmethod
    def named(cls, name: str) -> Algorithm:
        """The algorithm called ``name`` (``"token_bucket"``) in settings and models."""
        return cls[name.upper()]

    @property
    def setting_name(self) -> str:
        """Its name in settings, models and the admin (``"token_bucket"``)."""
        return self.name.lower()

    @property
    def rolling(self) -> bool:
        """A rate over a rolling or aligned window (codes up to LEAKY_BUCKET): what adaptive multipliers scale."""
        return self <= Algorithm.LEAKY_BUCKET

    @property
    def own_key(self) -> bool:
        """Whether a client's state is a key of its own (a sorted set) rather than a field of its bucket hash."""
        return self in (Algorithm.SLIDING_WINDOW_LOG, Algorithm.CONCURRENCY)

    @property
    def key_tag(self) -> str:
        """The two letters naming it in a window's field (quotas.keys.window_field): part of stored state."""
        return _KEY_TAGS[self]


_KEY_TAGS = {
    Algorithm.FIXED_WINDOW: "fw",
    Algorithm.SLIDING_WINDOW_LOG: "sl",
    Algorithm.SLIDING_WINDOW_COUNTER: "sc",
    Algorithm.TOKEN_BUCKET: "tb",
    Algorithm.LEAKY_BUCKET: "lb",
    Algorithm.PERIOD_QUOTA: "pq",
    Algorithm.PERIOD_REQUESTS: "pr",
    Algorithm.BUDGET: "bd",
    Algorithm.CONCURRENCY: "cc",
}

#: Days a usage hash (one bucket of clients, one UTC day) outlives its day: the usage flush and
#: reports can read today's and this many earlier days' counters.
USAGE_TTL_DAYS = 3
#: Usage counters, as the scripts name them in a hash's fields, and what each counts.
USAGE_COUNTERS = {
    "a": "allowed",
    "dr": "denied_rate",
    "db": "denied_budget",
    "da": "denied_acl",
    "dc": "denied_capacity",
    "dx": "denied_banned",
    "sw": "shadow_would_deny",
    "wx": "weight",  # units beyond one a request: weight = allowed + wx (one HINCRBY less for most requests)
    "c": "cost_micros",
}

#: Wire code of each algorithm by its setting name.
ALGORITHM_CODES: dict[str, int] = {a.setting_name: int(a) for a in Algorithm}


def parse_multipliers(raw: bytes | str | None) -> dict[int, float]:
    """The adaptive multipliers by plan id, as the adaptive app publishes them (quotas.keys.multipliers_key).

    The value is JSON: ``{"<plan id>": multiplier, ..., "updated_at": ...}``.
    Entries that are not a plan id with a multiplier in ``(0, 1]`` are ignored
    (multipliers only ever reduce limits); an unreadable value counts as none.
    """
    if not raw:
        return {}
    try:
        body = json.loads(raw)
    except (TypeError, ValueError):
        logger.warning("quotas: unreadable adaptive multipliers %r", raw[:200])
        return {}
    out: dict[int, float] = {}
    for key, value in body.items() if isinstance(body, dict) else ():
        try:
            plan_id, multiplier = int(key), float(value)
        except (TypeError, ValueError):
            continue  # "updated_at", or junk
        if math.isfinite(multiplier) and 0 < multiplier <= 1:
            out[plan_id] = multiplier
    return out


def lua_constants() -> str:
    """Lua ``local`` definitions of every algorithm code and the usage TTL, for the top of each script."""
    lines = ["-- Generated from quotas/protocol.py (Algorithm): do not edit in the .lua files."]
    lines += [f"local {a.name} = {int(a)}" for a in Algorithm]
    lines.append(f"local USAGE_TTL_DAYS = {USAGE_TTL_DAYS}")
    return "\n".join(lines) + "\n"
