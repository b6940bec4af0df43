"""What the Lua scripts answer, and its decoding: decide.lua's reply (a head, then each window's slots; its flags)
and adjust.lua's. Part of the contract :mod:`quotas.contract.protocol` owns: the layout here is generated into the
scripts' constants (``REPLY_*``, ``WINDOW_REPLY_*``, ``FLAG_*``, ``NEVER``) with the rest of it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from enum import IntEnum
from typing import NamedTuple


class DecideFlag(IntEnum):
    """Why decide.lua refused, in the reply's flags slot (0: none of these)."""

    REDUCED_ONLY = 1  # refused only because of the adaptive multiplier (503, not 429)
    BANNED = 2  # refused because the client is banned; its limits were not read
    BAN_STARTED = 4  # this refusal started a ban


#: A retry that can never come: the request is heavier than the window (WindowReply.retry_us).
NEVER = -1


# A NamedTuple rather than a frozen dataclass: made from its slice of the reply with one tuple copy, on every
# decision and for every window (0.2 instead of 0.65 us a window; docs/benchmark-history.md).
class WindowReply(NamedTuple):
    """One window's outcome in decide.lua's reply: its slots, in the order of these fields."""

    ok: int  # 1 admitted, 0 refused
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
    granted: int  # requests' worth of units taken: 1, or an allowance's size
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
        make = WindowReply._make
        windows = [make(raw[base : base + REPLY_PER_WINDOW]) for base in range(REPLY_HEAD, len(raw), REPLY_PER_WINDOW)]
        return cls(raw[0] == 1, raw[1], raw[2], raw[3], raw[4], windows)


#: decide.lua's reply layout, from the field order above (generated into Lua as REPLY_* and WINDOW_REPLY_*).
REPLY_HEAD_FIELDS = [f.name for f in fields(DecideReply) if f.name != "windows"]
WINDOW_REPLY_FIELDS = list(WindowReply._fields)
REPLY_HEAD = len(REPLY_HEAD_FIELDS)
REPLY_PER_WINDOW = len(WINDOW_REPLY_FIELDS)


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
