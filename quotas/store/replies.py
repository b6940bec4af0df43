"""What the store reads back: the :class:`~quotas.store.decision.Decision` in decide.lua's reply
(:func:`decision_of`, :class:`ReplyDecision`, whose states, like a served decision's, are made when first read:
:class:`StatesOnRead`), the states a banned client's windows show (:func:`banned_states`), and a client's ban as
ban.lua keeps it (:func:`parse_ban`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from quotas.contract.protocol import US_PER_SECOND
from quotas.contract.reply_layout import (
    NEVER,
    REPLY_HEAD,
    REPLY_HEAD_FIELDS,
    REPLY_PER_WINDOW,
    WINDOW_REPLY_FIELDS,
    DecideFlag,
)
from quotas.rules.limits import Window
from quotas.store.decision import DecideCall, Decision, Reading, WindowState, scaled

#: The states a decision whose states are made on first read is built with: none yet (see StatesOnRead).
NOT_MADE: list[WindowState] = []


class StatesOnRead(Decision):
    """A decision whose states are made when first read (by its :meth:`made_states`), then kept.

    Most requests read no state but through their headers (:meth:`readings`) and the service's
    :meth:`notes`, which such a decision gives without making them: a state is a dataclass built by keyword,
    the dearest part of a decision with several windows (figures in docs/benchmark-history.md). States
    assigned, or made, are what every reader reads from then on. Here rather than beside Decision: a decision
    read back from the store, or served from an allowance (quotas.store.served), is one; the request's path then
    enters one module less."""

    __slots__ = ("_states",)
    _states: list[WindowState] | None

    @property
    def states(self) -> list[WindowState]:
        """Each window's state (made on first read, then kept)."""
        states = self._states
        if states is None:
            states = self._states = self.made_states()
        return states

    @states.setter
    def states(self, states: list[WindowState]) -> None:
        self._states = None if states is NOT_MADE else states

    def made_states(self) -> list[WindowState]:
        """The states, worked out from what the decision keeps in their place."""
        raise NotImplementedError


def decision_of(call: DecideCall, specs: list[bytes], raw: Sequence[int], memo: dict[str, Any] | None) -> Decision:
    """The decision in decide.lua's reply ``raw`` to ``call``, whose windows' specs were ``specs``, sharing
    ``memo`` (:attr:`Decision.memo`) with the decisions of the same windows and weight.

    Raises ValueError for a reply of another length than the head alone (a banned client's) or the head and
    every window's slots."""
    windows, multiplier = call.windows, call.multiplier
    size = len(raw)
    if size != REPLY_HEAD + REPLY_PER_WINDOW * len(windows) and size != REPLY_HEAD:
        raise ValueError(f"decide.lua replied {size} values for {len(windows)} windows")
    if raw[_FLAGS] != _BANNED:  # every window's slots follow the head
        # Made in two steps: a class call would pack its arguments and call __init__ from C (docs/benchmark-history.md).
        decision = ReplyDecision.__new__(ReplyDecision)
        decision.read(call, specs, raw, memo)
        return decision
    # A banned client's limits are not read: no window in the reply.
    _allowed, now_us, _flags, ban_wait_us, granted = raw[:REPLY_HEAD]
    return Decision(
        allowed=False, states=banned_states(windows, ban_wait_us, multiplier), now=now_us / US_PER_SECOND,
        weight=call.weight, tag=call.tag, cost_micros=call.cost_micros, usage=call.usage, specs=specs,
        multiplier=multiplier, banned=True, ban_wait_us=ban_wait_us, request_id=call.request_id, granted=granted,
        memo=memo,
    )  # fmt: skip


class ReplyDecision(StatesOnRead):
    """The decision in decide.lua's reply to a call (made by :func:`decision_of`, then :meth:`read`): Decision's
    fields from the reply's head and the call, its states made from the reply's slots when first read. Built by
    keyword, a copy (what :func:`dataclasses.replace` makes), its states given."""

    __slots__ = ("_raw", "_windows")
    _raw: Sequence[int]
    _windows: Sequence[Window]

    def __init__(self, **fields: Any) -> None:
        Decision.__init__(self, **fields)
        self._raw, self._windows = (), ()

    # The reply's slots are read where they are, in the order of DecideReply's head and WindowReply's fields (_SLOTS),
    # rather than through DecideReply.decode's objects (figures in docs/benchmark-history.md). Unpacking the head fails
    # loudly if its layout ever changes.
    def read(self, call: DecideCall, specs: list[bytes], raw: Sequence[int], memo: dict[str, Any] | None) -> None:
        """Decision's fields from decide.lua's reply ``raw`` to ``call`` (see :func:`decision_of`)."""
        allowed, now_us, flags, ban_wait_us, granted = raw[:REPLY_HEAD]
        # Decision's __init__ called as a function: with keywords, no dict made (a class call makes one). At most
        # 14 keywords: with 15, Python 3.11 compiles the call to CALL_FUNCTION_EX, a dict of them and a call from C
        # (6,500 instructions more, docs/benchmark-history.md); memo is set after it.
        Decision.__init__(
            self, allowed=allowed == 1, states=NOT_MADE, now=now_us / US_PER_SECOND, weight=call.weight,
            tag=call.tag, cost_micros=call.cost_micros, usage=call.usage, specs=specs, multiplier=call.multiplier,
            reduced_only=flags == _REDUCED_ONLY, ban_started=flags == _BAN_STARTED, ban_wait_us=ban_wait_us,
            request_id=call.request_id, granted=granted,
        )  # fmt: skip
        self.memo = memo
        self._raw = raw
        self._windows = call.windows

    def made_states(self) -> list[WindowState]:
        """Each window's state, from its slots in the reply."""
        raw, multiplier = self._raw, self.multiplier
        states = []
        start = REPLY_HEAD
        for window in self._windows:
            ok, remaining, reset_us, retry_us, delay_us, used, alert = raw[start : start + REPLY_PER_WINDOW]
            start += REPLY_PER_WINDOW
            states.append(
                WindowState(
                    window=window,
                    ok=ok == 1,
                    remaining=remaining,
                    reset_us=reset_us,
                    retry_us=None if retry_us == NEVER else retry_us,
                    delay_us=delay_us,
                    used=used,
                    alert=alert,
                    quota=window.quota if multiplier == 1.0 else scaled(window, multiplier),
                )
            )
        return states

    def readings(self) -> list[Reading]:
        """Each window's numbers, from its slots in the reply (the states not made)."""
        if self._states is not None:
            return Decision.readings(self)
        raw, multiplier = self._raw, self.multiplier
        unscaled = multiplier == 1.0  # compared once, not a window
        readings: list[Reading] = []
        start = REPLY_HEAD
        for window in self._windows:
            # Each slot read at its place (see _SLOTS): a slice a window and its unpacking cost about 750 instructions
            # more a window (docs/benchmark-history.md).
            retry_us = raw[start + 3]
            readings.append(
                (
                    window,
                    raw[start] == 1,
                    raw[start + 1],
                    raw[start + 2],
                    None if retry_us == NEVER else retry_us,
                    window.quota if unscaled else scaled(window, multiplier),
                )
            )
            start += REPLY_PER_WINDOW
        return readings

    def notes(self) -> tuple[int, bool, list[WindowState]]:
        """:meth:`Decision.notes`, from the reply's slots (the states made only for a shadow window's refusal): of
        the windows that can show a delay, an alert or a shadow's refusal (:func:`noted_windows`, kept in the memo
        for the decisions of these windows), of every window without a memo."""
        if self._states is not None:
            return Decision.notes(self)
        raw, windows, memo = self._raw, self._windows, self.memo
        noted: Sequence[int] | None
        if memo is None:
            noted = range(len(windows))
        else:
            noted = memo.get("notes")
            if noted is None:  # the first decision of these windows
                noted = memo["notes"] = noted_windows(windows)
        delay_us, alerting, shadow_refused = 0, False, False
        for index in noted:
            start = REPLY_HEAD + index * REPLY_PER_WINDOW
            delay = raw[start + 4]  # each slot read at its place (see _SLOTS and readings)
            if delay > delay_us:  # noqa: PLR1730  (max() is a call; this is a compare)
                delay_us = delay
            if raw[start + 6]:
                alerting = True
            if raw[start] != 1 and windows[index].shadow:
                shadow_refused = True
        return delay_us, alerting, self.would_deny() if shadow_refused else []


def noted_windows(windows: Sequence[Window]) -> tuple[int, ...]:
    """The places of the windows whose reply can hold what :meth:`ReplyDecision.notes` looks for: a shaping delay
    (a leaky bucket with a ``max_delay``), an alert (a calendar period's) or a refusal that does not refuse (a shadow
    window's). decide.lua replies 0 for the others' delay and alert, and their refusals are the decision's: most
    routes have none to read (a cold decision, 5 limits: 130 bytecodes, about 4,000 instructions less)."""
    return tuple(i for i, w in enumerate(windows) if w.max_delay > 0 or w.period or w.shadow)


# The reply's flags as plain ints: an IntEnum member's lookup goes through the enum's descriptor each time.
_BANNED, _BAN_STARTED, _REDUCED_ONLY = int(DecideFlag.BANNED), int(DecideFlag.BAN_STARTED), int(DecideFlag.REDUCED_ONLY)
#: Where the head's flags are in the reply.
_FLAGS = REPLY_HEAD_FIELDS.index("flags")
#: A window's slots in the order ReplyDecision.readings and notes read them at (their offsets from the window's first):
#: checked here, so that a change of decide.lua's reply layout fails at import rather than reads another slot.
_SLOTS = ["ok", "remaining", "reset_us", "retry_us", "delay_us", "used", "alert"]
if _SLOTS != WINDOW_REPLY_FIELDS:
    raise ImportError(f"decide.lua's window slots are {WINDOW_REPLY_FIELDS}; quotas.store.replies reads {_SLOTS}")


def banned_states(windows: Sequence[Window], wait_us: int, multiplier: float) -> list[WindowState]:
    """What a banned client's windows show: nothing left until the ban ends.

    The script does not read a banned client's limits, so there are no real
    states; these give every 429 of a ban its RateLimit headers (r=0, t = the
    ban's end) without counting as refusals of those windows (``ok`` stays True:
    the ban refused the request, not the windows).
    """
    return [
        WindowState(window=w, ok=True, remaining=0, reset_us=wait_us, retry_us=0, quota=scaled(w, multiplier))
        for w in windows
    ]


@dataclass(frozen=True, slots=True)
class Ban:
    """A client's ban, as ban.lua keeps it in its ``!bn`` field."""

    until: float  # seconds since the epoch, by the Redis server's clock
    strikes: int  # bans in a row (the n-th lasts the policy's n-th duration)
    seconds_left: float = 0.0  # when read by RedisStore.ban: until it ends


#: A ``!bn`` value: "<until us>:<strikes>:<strikes kept until us>" (see ban.lua).
_BAN = re.compile(r"(\d+):(\d+):(\d+)")


def parse_ban(raw: bytes | str | None) -> Ban | None:
    """The ban in a ``!bn`` value (ended or not), or None for no value or one not in ban.lua's format."""
    found = _BAN.fullmatch(raw.decode() if isinstance(raw, bytes) else raw or "")
    return Ban(int(found[1]) / US_PER_SECOND, int(found[2])) if found else None
