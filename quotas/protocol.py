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
import struct
from collections.abc import Sequence
from dataclasses import dataclass, fields
from enum import IntEnum
from typing import NamedTuple

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
    def periodic(self) -> bool:
        """A calendar period (period quotas and budgets): its spec carries the period's bounds.

        See :meth:`WindowSpec.for_period`.
        """
        return self in (Algorithm.PERIOD_QUOTA, Algorithm.BUDGET, Algorithm.PERIOD_REQUESTS)

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

#: A window spec's fixed part: algorithm code (u8), limit, three window numbers, weight (five doubles, see
#: :class:`WindowSpec`), shadow (u8, 0 or 1) and the field's length in bytes (u8), little-endian, packed;
#: the field's bytes follow. Binary rather than text because unpacking it in Lua costs a third of matching
#: a text pattern, and yields numbers, not strings.
_SPEC = struct.Struct("<BdddddBB")
#: The same format as Lua's ``struct.unpack`` reads it: "c0" is a string whose length is the number before it.
SPEC_FORMAT = _SPEC.format + "c0"


class WindowSpec(NamedTuple):
    """One window as the scripts read it (``parse_spec`` in ``lua/common.lua``); times in microseconds.

    Rolling windows (codes up to LEAKY_BUCKET) and concurrency (whose window is
    its lease) use the fields as named. A calendar period (:attr:`Algorithm.periodic`)
    has no window length, capacity or shaping delay; its bounds travel in those
    three slots instead: build it with :meth:`for_period`, and the scripts read
    them back as ``w.start``, ``w.stop`` and ``w.next_stop``.

    Numbers travel as doubles: exact for integers below 2**53, which holds
    microsecond timestamps for the next 280 years and any quota in use.
    """

    code: int
    limit: int
    window_us: int  # periods: the current period's start
    capacity: int  # periods: the current period's end (us)
    weight: int
    max_delay_us: int  # > 0 only for a shaping leaky bucket; periods: the next period's end
    shadow: bool
    field: str  # the window's field in the client's hash, or its own key's suffix (quotas.keys.window_field)

    @classmethod
    def for_period(
        cls, code: int, limit: int, weight: int, shadow: bool, field: str, *, start_us: int, end_us: int,
        next_end_us: int,
    ) -> WindowSpec:  # fmt: skip
        """A calendar period's spec: the current period ``[start_us, end_us)`` and the end of the next one.

        The script picks between the two with the Redis server's clock, so a
        reset never waits for an application host's clock (see ``period.lua``).
        """
        return cls(code, limit, start_us, end_us, weight, next_end_us, shadow, field)

    def pack(self) -> bytes:
        """The spec's bytes; raises ValueError for a field longer than 255 bytes."""
        name = self.field.encode()
        if len(name) > 255:
            raise ValueError(f"window field {self.field!r} is longer than 255 bytes")
        numbers = (self.code, self.limit, self.window_us, self.capacity, self.weight, self.max_delay_us)
        return _SPEC.pack(*numbers, 1 if self.shadow else 0, len(name)) + name

    @classmethod
    def unpack(cls, raw: bytes) -> WindowSpec:
        """The spec ``raw`` holds (the inverse of :meth:`pack`, for tests and debugging)."""
        code, limit, window, capacity, weight, max_delay, shadow, length = _SPEC.unpack_from(raw)
        field = raw[_SPEC.size : _SPEC.size + length].decode()
        return cls(code, int(limit), int(window), int(capacity), int(weight), int(max_delay), shadow == 1, field)


class DecideArg(IntEnum):
    """The fixed ARGV slots of decide.lua, by position (Lua counts from 1); window specs follow them."""

    NOW = 1  # microseconds, or "" for the Redis server's clock
    WEIGHT = 2  # the request's weight for every rate window, or "" for each window's own
    COST = 3  # the estimated cost in micro-units (budget windows spend it)
    USAGE = 4  # the usage field prefix "<plan>|<scope>", or "" not to count
    MODE = 5  # "" decide, "peek", "acl-allow", "acl-deny"
    MULTIPLIER = 6  # the plan's adaptive multiplier, "" for 1
    BAN_POLICY = 7  # "<refusals> <window us> <durations us,...>", or ""
    REQUEST_ID = 8  # names the request's concurrency leases, or ""
    FIELD_PREFIX = 9  # the client's field prefix "<client>|"
    DAY = 10  # the usage key's day in days since 1970 (the application's clock), or ""


#: Slots before the first window spec in decide.lua's ARGV.
DECIDE_FIXED_ARGS = len(DecideArg)


class RefundArg(IntEnum):
    """The fixed ARGV slots of refund.lua; the specs of the windows to refund follow them."""

    NOW = 1  # the decision's time (us)
    WEIGHT = 2  # the decision's weight override, or "" for each window's own
    FIELD_PREFIX = 3  # the client's field prefix "<client>|"


class AdjustArg(IntEnum):
    """The fixed ARGV slots of adjust.lua; the specs of the decision's budget windows follow them."""

    NOW = 1  # the decision's time (us)
    DELTA = 2  # actual minus estimated cost, micro-units (may be negative)
    USAGE = 3  # the usage field prefix, as for decide.lua, or "" not to count
    FIELD_PREFIX = 4  # the client's field prefix "<client>|"


class ReleaseArg(IntEnum):
    """The ARGV of release.lua (its KEYS are the request's concurrency sets)."""

    REQUEST_ID = 1  # the request whose leases end


class UsageAddArg(IntEnum):
    """The fixed ARGV slots of usage_add.lua; "field, amount" pairs follow them."""

    DAY = 1  # the usage hash's day, in days since 1970
    WRITER = 2  # the writing process's id
    SEQ = 3  # the batch's sequence number (a hash takes each writer's batch once)


#: Each script's ARGV layout, by the prefix its Lua constants carry (REFUND_ARG_NOW, REFUND_FIXED_ARGS).
_ARGV_LAYOUTS: dict[str, type[IntEnum]] = {
    "DECIDE": DecideArg,
    "REFUND": RefundArg,
    "ADJUST": AdjustArg,
    "RELEASE": ReleaseArg,
    "USAGE_ADD": UsageAddArg,
}


class DecideFlag(IntEnum):
    """Why decide.lua refused, in the reply's flags slot (0: none of these)."""

    REDUCED_ONLY = 1  # refused only because of the adaptive multiplier (503, not 429)
    BANNED = 2  # refused because the client is banned; its limits were not read
    BAN_STARTED = 4  # this refusal started a ban


#: A retry that can never come: the request is heavier than the window (WindowReply.retry_us).
NEVER = -1


@dataclass(frozen=True, slots=True)
class WindowReply:
    """One window's outcome in decide.lua's reply: its slots, in the order of these fields."""

    ok: bool
    remaining: int
    reset_us: int  # until the full quota is back
    retry_us: int  # until this request would fit: 0 when ok, NEVER when it never can
    delay_us: int  # how long a shaping leaky bucket holds the request
    used: int  # periods and budgets: what the period has used, after this request
    alert: int  # budgets: thresholds newly reached, a mask (1 = 80 %, 2 = 100 %)


@dataclass(frozen=True, slots=True)
class DecideReply:
    """decide.lua's reply: a head (these fields but ``windows``, in order), then each window's slots."""

    allowed: bool
    now_us: int  # the decision's time (the Redis server's clock unless the call gave one)
    flags: int  # a DecideFlag, or 0
    ban_wait_us: int  # until the client's ban ends (FLAG_BANNED, FLAG_BAN_STARTED)
    windows: list[WindowReply]  # one per window spec sent; none when the reply is the head alone

    @classmethod
    def decode(cls, raw: Sequence[int], window_count: int) -> DecideReply:
        """The reply ``raw`` of a call that sent ``window_count`` specs.

        A reply of the head alone (a banned client, whose limits were not
        read; an ACL count) has no windows. Raises ValueError for any other
        length than the head and ``window_count`` windows.
        """
        if len(raw) != REPLY_HEAD and len(raw) != REPLY_HEAD + REPLY_PER_WINDOW * window_count:
            raise ValueError(f"decide.lua replied {len(raw)} values for {window_count} windows")
        windows = []
        for base in range(REPLY_HEAD, len(raw), REPLY_PER_WINDOW):
            ok, remaining, reset, retry, delay, used, alert = raw[base : base + REPLY_PER_WINDOW]
            windows.append(WindowReply(ok == 1, remaining, reset, retry, delay, used, alert))
        return cls(raw[0] == 1, raw[1], raw[2], raw[3], windows)


#: decide.lua's reply layout, from the field order above (generated into Lua as REPLY_* and WINDOW_REPLY_*).
_REPLY_HEAD_FIELDS = [f.name for f in fields(DecideReply) if f.name != "windows"]
_WINDOW_REPLY_FIELDS = [f.name for f in fields(WindowReply)]
REPLY_HEAD = len(_REPLY_HEAD_FIELDS)
REPLY_PER_WINDOW = len(_WINDOW_REPLY_FIELDS)


@dataclass(frozen=True, slots=True)
class AdjustedBudget:
    """One budget in adjust.lua's reply ({used, alert} per budget spec sent, in order)."""

    used: int  # after the adjustment; -1 when the decision's period has ended (nothing was changed)
    alert: int  # thresholds newly reached, as in WindowReply

    @property
    def period_ended(self) -> bool:
        """Whether a later period began after the decision, so its state was left alone."""
        return self.used < 0

    @classmethod
    def decode_all(cls, raw: Sequence[int]) -> list[AdjustedBudget]:
        """Every budget of an adjust.lua reply."""
        return [cls(raw[i], raw[i + 1]) for i in range(0, len(raw), 2)]


def decide_args(
    field_prefix: str,
    *,
    now: object = "",
    weight: object = "",
    cost: int = 0,
    usage: str = "",
    mode: str = "",
    multiplier: str = "",
    ban_policy: str = "",
    request_id: str = "",
    day: object = "",
    specs: Sequence[bytes] = (),
) -> list[object]:
    """decide.lua's ARGV: the fixed slots in :class:`DecideArg` order, then the window specs."""
    return [now, weight, cost, usage, mode, multiplier, ban_policy, request_id, field_prefix, day, *specs]


def refund_args(field_prefix: str, *, now_us: int, weight: int | None, specs: Sequence[bytes]) -> list[object]:
    """refund.lua's ARGV: the fixed slots in :class:`RefundArg` order, then the specs of the windows to refund."""
    return [now_us, "" if weight is None else weight, field_prefix, *specs]


def adjust_args(field_prefix: str, *, now_us: int, delta: int, usage: str, specs: Sequence[bytes]) -> list[object]:
    """adjust.lua's ARGV: the fixed slots in :class:`AdjustArg` order, then the budget windows' specs."""
    return [now_us, delta, usage, field_prefix, *specs]


def release_args(request_id: str) -> list[object]:
    """release.lua's ARGV (:class:`ReleaseArg`)."""
    return [request_id]


def usage_add_args(day: int, writer: str, seq: int, pairs: Sequence[object]) -> list[object]:
    """usage_add.lua's ARGV: the fixed slots in :class:`UsageAddArg` order, then "field, amount" pairs."""
    return [day, writer, seq, *pairs]


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
    """Lua ``local`` definitions of the contract (algorithms, the window spec format, every script's ARGV
    slots, decide.lua's reply layout and flags, the usage TTL), for the top of each assembled script."""
    lines = ["-- Generated from quotas/protocol.py: do not edit in the .lua files."]
    lines += [f"local {a.name} = {int(a)}" for a in Algorithm]
    periodic = ", ".join(f"[{a.name}] = true" for a in Algorithm if a.periodic)
    lines.append(f"local IS_PERIOD = {{{periodic}}}  -- specs carrying a calendar period's bounds")
    lines.append(f"local SPEC_FORMAT = '{SPEC_FORMAT}'")
    for script, layout in _ARGV_LAYOUTS.items():
        lines += [f"local {script}_ARG_{a.name} = {int(a)}" for a in layout]
        lines.append(f"local {script}_FIXED_ARGS = {len(layout)}")
    lines += [f"local FLAG_{f.name} = {int(f)}" for f in DecideFlag]
    lines += [f"local REPLY_{name.upper()} = {i}" for i, name in enumerate(_REPLY_HEAD_FIELDS, 1)]
    lines += [f"local WINDOW_REPLY_{name.upper()} = {i}" for i, name in enumerate(_WINDOW_REPLY_FIELDS, 1)]
    lines += [f"local REPLY_HEAD = {REPLY_HEAD}", f"local REPLY_PER_WINDOW = {REPLY_PER_WINDOW}"]
    lines.append(f"local NEVER = {NEVER}  -- retry value for a request that can never fit its limit")
    lines.append(f"local USAGE_TTL_DAYS = {USAGE_TTL_DAYS}")
    return "\n".join(lines) + "\n"
