"""Local allowances: a busy client's next requests admitted in this process without a Redis call.

When a client sends one process more than ``MIN_RATE`` requests a second,
its next decision asks Redis, in the same single call, for an *allowance*:
``n`` requests' worth of units, checked against every window of the request
and consumed from all of them at once, exactly as ``n`` requests would be
(``check_request`` in decide.lua). ``n`` is about the client's rate here
times ``HORIZON``, at most ``MAX_REQUESTS``, and decide.lua cuts it further
so that no window gives more than ``SHARE`` of what it has left: other
processes are not refused early. The process then admits that client's next
``n - 1`` requests with the same windows from the allowance, until it is
spent or ends; the request after that goes to Redis as before.

Never more than the limit: the units were taken before the requests they
admit, and an allowance ends no later than the window or period it was taken
in (fixed windows, sliding window counters, periods and budgets), so units
never cross into a window that did not pay for them. A sliding log records
the units at the allowance's end, so they leave the log no sooner than the
last request they may admit. Token buckets and GCRA refill on their own:
taking early only spends sooner.

What is given back: the units an allowance did not use return to the windows
they came from when it ends (the poller, within about a second; every
allowance at shutdown). A process killed outright loses them until the windows
move on: the client is held under its limit by at most one allowance per
process (at most ``MAX_REQUESTS`` requests, and less than ``SHARE`` of any
window), never over it.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from operator import attrgetter
from typing import Any

from quotas.clock import SYSTEM_CLOCK, Clock
from quotas.contract.protocol import US_PER_SECOND
from quotas.rules.limits import Window
from quotas.store.decision import DecideCall, Decision, WindowState
from quotas.store.served import ServedDecision, served_states

#: Seconds over which a client's rate in this process is measured; a span shorter than the second counts
#: as this long, so that one request alone never reads as a burst.
_RATE_SPAN, _SHORTEST_SPAN = 1.0, 0.1
#: Clients whose rate one process keeps at most between two of the poller's clean-ups.
_MAX_CLIENTS = 100_000
#: How long (s) an upward reconciliation's cut is remembered: longer than any decision's round trip.
_CUT_MEMORY = 60.0
#: A window's part of an allowance's key (see Allowances.key).
_WINDOW_KEY = attrgetter("state_field", "quota")
#: Windows tuples whose part of an allowance's key is kept at most (about as many as the rules have routes).
_MAX_ROUTES = 4096
#: Windows whose units must be used in the window (or period) they were taken in.
_BOUNDED = frozenset({"fixed_window", "sliding_window_counter", "period_requests", "period_quota", "budget"})


def eligible(windows: Sequence[Window]) -> bool:
    """Whether requests with ``windows`` may be admitted from an allowance.

    Not with a concurrency limit (each request holds a lease), a shadow
    window (each request must be seen by it) or a shaping leaky bucket (each
    request gets its own delay); not without a window at all.
    """
    return bool(windows) and not any(w.algorithm == "concurrency" or w.shadow or w.max_delay > 0 for w in windows)


@dataclass(slots=True)
class Allowance:
    """What one grant gave: ``size`` requests' units, taken at ``granted``'s time, usable until ``ends_at``."""

    granted: Decision
    size: int
    ends_at: float  # the runtime clock's monotonic()
    started: float  # the runtime clock's monotonic() at the grant
    used: int = 1  # requests admitted from it, the one that took it included
    counted: int = 1  # of those, counted in usage so far (Redis counted the one that took it)
    lock: threading.Lock = field(default_factory=threading.Lock)
    # Given to every decision served from it (see Decision.memo): what readers derive once per allowance.
    memo: dict[str, Any] = field(default_factory=dict, repr=False)
    # Each window's state at the grant, unpacked, with the units one request takes from it: worked out once here
    # rather than for every request served (granted.units() was a call per window and request).
    _units: list[tuple[Window, int | None, int, int, int, int, int]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        granted = self.granted
        # What each request sees is the grant's state less the units still ahead (served_states). A budget's used
        # as decide.lua reports it is its committed spend, the later requests' reservation apart: added back here,
        # or the grant's own request reported its alert with their units taken off once more (0.06 for 0.08).
        reserved = (self.size - 1) * granted.cost_micros
        self._units = [
            (
                s.window, s.remaining, s.reset_us, s.used + reserved if s.window.is_budget else s.used, s.alert,
                s.quota, granted.cost_micros if s.window.is_budget else granted.units(s.window),
            )
            for s in granted.states
        ]  # fmt: skip

    def uncounted(self) -> int:
        """The requests it admitted that are not in usage yet; from now on they count as counted."""
        with self.lock:
            new, self.counted = self.used - self.counted, self.used
        return new

    @property
    def unused(self) -> int:
        """Requests' worth of units taken but not used (what goes back when it ends)."""
        return self.size - self.used

    def serve(self, now: float) -> Decision | None:
        """The decision admitting one more request, or None when the allowance is spent or over."""
        with self.lock:
            if self.used >= self.size or now >= self.ends_at:
                return None
            self.used += 1
            ahead = self.size - self.used  # requests' units still unused after this one
        return ServedDecision(self.granted, self._units, ahead, int((now - self.started) * US_PER_SECOND), self.memo)

    def states_now(self, ahead: int, elapsed_us: int, alerts: bool) -> list[WindowState]:
        """The windows as one request from the allowance sees them: see :func:`served_states`."""
        return served_states(self._units, ahead, elapsed_us, alerts)


class Allowances:
    """This process's allowances, by client and request kind, and how busy each client is here."""

    def __init__(
        self, *, horizon: float, min_rate: float, share: float, max_requests: int, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self.horizon = horizon
        self._monotonic = clock.monotonic  # the runtime's clock, bound once (time.monotonic itself in production)
        self.min_rate = min_rate
        self.share = share
        self.max_requests = max_requests
        self._by_key: dict[tuple, Allowance] = {}
        # Per client: how many of _by_key's allowances are its. A client with none (most of those that ask Redis) is
        # passed by without its key made.
        self._held: dict[str, int] = {}
        # Per windows tuple (by id, held): its part of the key (see key).
        self._windows_parts: dict[int, tuple[Sequence[Window], str]] = {}
        # Per client: its last allowance granted, with what its key was made of (see take).
        self._last: dict[str, tuple[Sequence[Window], int | None, int, str | None, float, Allowance]] = {}
        self._ended: list[Allowance] = []  # replaced or over, not yet given back
        # Per client: [when the current span began (monotonic), requests in it, the last span's rate].
        self._seen: dict[str, list[float]] = {}
        # Per client: when (monotonic) end_client last ended its allowances (a cost above its estimate).
        self._cut: dict[str, float] = {}
        self._lock = threading.Lock()

    def key(self, call: DecideCall) -> tuple:
        """What makes two requests of one client interchangeable: the same windows, weight, cost and usage."""
        return self._key(call.tag, call.windows, call.weight, call.cost_micros, call.usage, call.multiplier)

    def _key(  # noqa: PLR0917  (the fields of a call that make its key)
        self,
        tag: str,
        windows: Sequence[Window],
        weight: int | None,
        cost_micros: int,
        usage: str | None,
        multiplier: float,
    ) -> tuple:
        if type(windows) is not tuple:  # made for this request (a list): its windows' fields, as they are
            return (tag, tuple(map(_WINDOW_KEY, windows)), weight, cost_micros, usage, multiplier)
        # A tuple a rules snapshot holds for a route: its windows' fields as one string, kept by the tuple's id (the
        # tuple held with it, so no other object has that id meanwhile). A string keeps its hash, where the tuple of
        # fields was made and hashed again on every request.
        kept = self._windows_parts.get(id(windows))
        if kept is None:
            if len(self._windows_parts) >= _MAX_ROUTES:
                self._windows_parts.clear()
            kept = self._windows_parts[id(windows)] = (windows, repr(tuple(map(_WINDOW_KEY, windows))))
        return (tag, kept[1], weight, cost_micros, usage, multiplier)

    def take(self, call: DecideCall) -> Decision | None:
        """An admission from this client's allowance for requests like ``call``, if one has units left. Else None,
        the request noted, and ``call.allowance`` set when the client is busy here (see :meth:`ask`)."""
        served, wanted = self.ask(call.tag, call.windows, call.weight, call.cost_micros, call.usage, call.multiplier)
        if wanted is not None:
            call.allowance = wanted
        return served

    def ask(  # noqa: C901, PLR0917  # one call for the service (see below); a call's fields
        self,
        tag: str,
        windows: Sequence[Window],
        weight: int | None,
        cost_micros: int,
        usage: str | None,
        multiplier: float,
    ) -> tuple[Decision | None, tuple[int, float, int] | None]:
        """For a request of client ``tag`` with these windows and options: an admission from its allowance, if one
        has units left; else (None, the allowance to ask for), the request noted. The allowance to ask for is
        None unless the client is busy here (its rate at least ``min_rate``) and such requests may be served from
        an allowance (:func:`eligible`): how many requests' units its decision should ask for, the share of a
        window they may take, and how long in us they may be used (``DecideCall.allowance``).

        Asked with the call's fields, not a call: the service asks before it builds the call, so a request an
        allowance serves builds none (docs/benchmark-history.md).

        The client's rate counts the requests its allowances serve too. Counting only those that reach Redis
        measured the rate of misses: allowances settled near sqrt(rate x horizon) requests (31 at 4,000 requests
        a second) instead of rate x horizon, capped at MAX_REQUESTS (50).
        """
        # One call, where serving, noting the request and sizing the next grant were three, and
        # _note's common cases (a request within the client's current span, a client not seen before) written
        # out: calls less on every decision.
        now = self._monotonic()
        served = None
        if tag in self._held:  # a client holding none (most of those that ask Redis) is passed by without its key
            # Its last allowance, if this request is like the one that took it: the same windows tuple (held in
            # _last, so the same object) and options make the same key. Compared here rather than the key made and
            # looked up on every busy request. One replaced or ended serves nothing (ends_at), and the key decides.
            last = self._last.get(tag)
            if (
                last is not None and last[0] is windows and last[1] == weight
                and last[2] == cost_micros and last[3] == usage and last[4] == multiplier
            ):  # fmt: skip
                served = last[5].serve(now)
            if served is None:
                allowance = self._by_key.get(self._key(tag, windows, weight, cost_micros, usage, multiplier))
                if allowance is not None:
                    served = allowance.serve(now)
        seen = self._seen.get(tag)
        if seen is not None and now - seen[0] < _RATE_SPAN:
            seen[1] += 1
        elif seen is None and len(self._seen) < _MAX_CLIENTS:
            seen = self._seen[tag] = [now, 1, 0.0]
        else:
            seen = self._note(tag, now)
        if served is not None:
            return served, None
        # Requests a second: over the last span, or over this one so far (a burst shows at once). Conditional
        # expressions rather than max(): see states_now.
        span = now - seen[0]
        rate = seen[1] / (span if span > _SHORTEST_SPAN else _SHORTEST_SPAN)
        if seen[2] > rate:  # noqa: PLR1730
            rate = seen[2]
        if rate >= self.min_rate:
            wanted = min(self.max_requests, math.ceil(rate * self.horizon))
            if wanted > 1 and eligible(windows):
                return None, (wanted, self.share, self.end_us)
        return None, None

    def _note(self, tag: str, now: float) -> list[float]:
        """Count one request of ``tag`` at ``now``; returns its meter (see ``_seen``)."""
        seen = self._seen.get(tag)
        if seen is None and len(self._seen) >= _MAX_CLIENTS:
            # A flood of new clients between two of the poller's clean-ups: count afresh (a busy client reads as
            # busy again within a tenth of a second), rather than scan the table on every request.
            self._seen.clear()
        if seen is None or now - seen[0] >= 2 * _RATE_SPAN:
            self._seen[tag] = seen = [now, 0, 0.0]
        elif now - seen[0] >= _RATE_SPAN:
            seen[:] = [now, 0, seen[1] / (now - seen[0])]
        seen[1] += 1
        return seen

    def grant(self, call: DecideCall, decision: Decision, asked: float | None = None) -> Decision:
        """Keep the allowance ``decision`` took; returns the decision as its own request sees it (the units
        still ahead in the allowance count as remaining: they are this client's).

        ``asked`` (the clock's ``monotonic()`` before the call went to Redis) is where its lifetime starts: Redis
        took the units, and stamped a sliding log's with their end, at some moment after it. Counting from
        the reply instead would let a reply that came back late serve past that stamp (by the round trip, or
        however long the process waited for the CPU), and a sliding log could then admit one unit too many
        in a second.
        """
        now = self._monotonic()
        started = now if asked is None else min(asked, now)
        allowance = Allowance(decision, decision.granted, started + self._lifetime(decision), started)
        key = self.key(call)
        with self._lock:
            if self._cut.get(call.tag, -math.inf) >= started:
                # A cost above its estimate ended the client's allowances while this call was on its way: Redis
                # may have sized the grant without that cost, so it is given back unused, not served from. The
                # budget property test found the overspend past its one-moment bound.
                allowance.ends_at = 0.0
                self._ended.append(allowance)
            else:
                old = self._by_key.get(key)
                self._by_key[key] = allowance
                if old is not None:
                    self._ended.append(old)
                else:
                    self._held[call.tag] = self._held.get(call.tag, 0) + 1
                if type(call.windows) is tuple:  # a list is made for one request: no later one has it
                    last = (call.windows, call.weight, call.cost_micros, call.usage, call.multiplier, allowance)
                    self._last[call.tag] = last
                else:
                    self._last.pop(call.tag, None)
        # The thresholds the grant crossed are reported by its own request (the served ones report none).
        return replace(decision, states=allowance.states_now(decision.granted - 1, 0, True))

    @property
    def end_us(self) -> int:
        """How long an allowance may be used, in us (what decide.lua is told, for sliding logs)."""
        return math.ceil(self.horizon * US_PER_SECOND)

    def logged_at(self, decision: Decision) -> int:
        """When (us) sliding logs recorded the units of the allowance taken by, or served as, ``decision``:
        at its end (decide.lua's ``check_request``), where giving them back must find them."""
        return int(decision.now * US_PER_SECOND) + self.end_us

    def _lifetime(self, decision: Decision) -> float:
        """Seconds the allowance may be used: the horizon, ended early by the end of a window or period
        its units must stay in."""
        seconds = self.horizon
        now_us = int(decision.now * US_PER_SECOND)
        for state in decision.states:
            window = state.window
            if window.algorithm not in _BOUNDED:
                continue
            if window.period:
                left_us = state.reset_us  # until the period ends
            else:
                span = window.window * US_PER_SECOND
                left_us = span - now_us % span  # until the aligned window (or the counter's current one) ends
            seconds = min(seconds, left_us / US_PER_SECOND)
        return max(0.0, seconds)

    def live(self) -> list[Allowance]:
        """Every allowance in use now (the poller counts what they served so far)."""
        with self._lock:
            return list(self._by_key.values())

    def held(self, tag: str) -> list[Allowance]:
        """The allowances this process holds for client ``tag`` now (for operators)."""
        with self._lock:
            return [allowance for key, allowance in self._by_key.items() if key[0] == tag]

    def end_client(self, tag: str) -> None:
        """End every allowance of client ``tag`` now (its next request asks Redis); :meth:`ended` hands them over
        to be given back."""
        with self._lock:
            self._cut[tag] = self._monotonic()
            self._held.pop(tag, None)
            self._last.pop(tag, None)
            for key in [k for k in self._by_key if k[0] == tag]:
                allowance = self._by_key.pop(key)
                with allowance.lock:  # no request is admitted from it after this
                    allowance.ends_at = 0.0
                self._ended.append(allowance)

    def end_all(self) -> None:
        """End every allowance now; :meth:`ended` hands them over to be given back."""
        with self._lock:
            self._ended.extend(self._by_key.values())
            self._by_key.clear()
            self._held.clear()
            self._last.clear()
            for allowance in self._ended:
                allowance.ends_at = 0.0

    def _forget_idle(self, now: float) -> None:
        """Forget the rates of clients not seen for two spans (they read as not busy anyway)."""
        for tag in [t for t, seen in list(self._seen.items()) if now - seen[0] >= 2 * _RATE_SPAN]:
            self._seen.pop(tag, None)
        for tag in [t for t, cut in list(self._cut.items()) if now - cut >= _CUT_MEMORY]:
            self._cut.pop(tag, None)

    def ended(self, everything: bool = False) -> list[Allowance]:
        """Take the allowances that are over (or, with ``everything``, all of them), to give back what they
        did not use; forgets clients not seen for a while."""
        now = self._monotonic()
        with self._lock:
            over = [k for k, a in self._by_key.items() if everything or now >= a.ends_at or a.used >= a.size]
            ended, self._ended = self._ended, []
            for key in over:
                allowance = self._by_key.pop(key)
                ended.append(allowance)
                last = self._last.get(key[0])
                if last is not None and last[5] is allowance:
                    del self._last[key[0]]
                left = self._held.pop(key[0]) - 1
                if left:
                    self._held[key[0]] = left
            self._forget_idle(now)
        for allowance in ended:
            with allowance.lock:  # no request is admitted from it after this
                allowance.ends_at = 0.0
        return ended
