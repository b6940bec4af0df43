"""What a decision says: per window, and for the whole request.

Shared by the Redis store (decisions from Redis) and the local fallback
(decisions made in-process while Redis is down).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from quotas.contract.protocol import US_PER_SECOND, Algorithm, WindowSpec
from quotas.rules.limits import Window


# Not frozen, as the service's Facts: a frozen dataclass's __init__ sets each field through a call. Without slots: the
# service's call (quotas.decide.hot_path.Call) is a DecideCall and its Verdict at once, and two classes with slots of
# their own cannot both be its bases.
@dataclass
class DecideCall:
    """What one decision is asked: client ``tag``'s ``windows``, and how (see :meth:`quotas.store.guard.Guard.decide`).

    ``weight`` overrides each rate window's own weight; budgets spend
    ``cost_micros``. ``usage`` ("<plan>|<scope>") counts the decision in
    the client's usage of the day; ``peek`` consumes and counts nothing.
    ``multiplier`` (adaptive limits) scales the rolling rate windows;
    ``ban_policy`` (see :func:`quotas.rules.snapshot.ban_policy_spec`) enables
    escalation; ``request_id`` names the request's concurrency leases.
    ``now`` (seconds since the epoch) asks at another moment than the engine's clock's: a one-off question,
    answered by the store alone (no allowance, nothing remembered). A test moves the engine's clock instead
    (:mod:`quotas.clock`), which keeps allowances and the refusal memory on.
    ``allowance_ok``: the guard may admit the request from the client's
    allowance (see :mod:`quotas.store.allowances`): nothing stands against it
    and the allowance was not asked yet (the service asks it itself before it
    builds its call, and then gives ``allowance`` and False here);
    ``allowance``, set for a busy client (by the guard, or the service): (requests
    wanted, the share of a window they may take, how long in us they may be used).
    """

    tag: str
    windows: Sequence[Window]
    weight: int | None = None
    now: float | None = None
    cost_micros: int = 0
    usage: str | None = None
    peek: bool = False
    multiplier: float = 1.0
    ban_policy: str = ""
    request_id: str = ""
    allowance_ok: bool = False
    allowance: tuple[int, float, int] | None = None


@dataclass(slots=True)
class WindowState:
    """The outcome of one window: whether it allowed, and what is left.

    ``retry_us`` is 0 when the window allowed, ``None`` when the request can
    never fit it (its weight exceeds the window's capacity). ``remaining`` is
    ``None`` when the state was not read from Redis (a locally remembered
    denial).
    """

    window: Window
    ok: bool
    remaining: int | None
    reset_us: int
    retry_us: int | None
    delay_us: int = 0
    used: int = 0  # periods and budgets: what the period has used (after this request)
    alert: int = 0  # budgets: thresholds newly reached, not yet reported (1 = 80 %, 2 = 100 %)
    quota: int = 0  # the quota in force: the window's, scaled by an adaptive multiplier

    # Written out rather than generated with a __post_init__ for the quota's default: one call less for every
    # window of every decision.
    def __init__(  # noqa: PLR0913, PLR0917  (the fields above, in their order)
        self,
        window: Window,
        ok: bool,
        remaining: int | None,
        reset_us: int,
        retry_us: int | None,
        delay_us: int = 0,
        used: int = 0,
        alert: int = 0,
        quota: int = 0,
    ) -> None:
        self.window = window
        self.ok = ok
        self.remaining = remaining
        self.reset_us = reset_us
        self.retry_us = retry_us
        self.delay_us = delay_us
        self.used = used
        self.alert = alert
        self.quota = quota or window.quota  # none given: the window's own


#: One money limit's committed spend moving, for its subscription's own alert thresholds (``Window.alerts``): the
#: window, its spend before and after (micro-units), and the end of its period as the store counts it (epoch s).
Span = tuple[Window, int, int, float]

#: One window's numbers as a decision read them: the window, whether it admitted the request, its remaining (None:
#: not read), its reset and retry (us; retry None: never fits) and the quota in force (see :meth:`Decision.readings`).
Reading = tuple[Window, bool, int | None, int, int | None, int]


@dataclass(slots=True)
class Decision:
    """The result of one decide call (:meth:`quotas.store.guard.Guard.decide_call`)."""

    allowed: bool
    states: list[WindowState]
    now: float  # seconds since the epoch, from the Redis server's clock
    weight: int | None = None
    local: bool = False  # decided from the in-process memory of over-limit clients
    tag: str = ""
    cost_micros: int = 0  # the estimated cost the budgets were charged
    usage: str | None = None  # the usage field prefix the request was counted under
    specs: list[bytes] = field(default_factory=list)  # the window specs as sent (for reconciliation)
    reconciled: bool = False
    multiplier: float = 1.0  # the adaptive multiplier the rate windows were scaled by
    reduced_only: bool = False  # refused only because of the multiplier (503, not 429)
    banned: bool = False  # refused because the client is banned (escalation), limits unread
    ban_started: bool = False  # this refusal started a ban
    ban_wait_us: int = 0  # until the ban ends
    request_id: str = ""  # holds concurrency leases until released
    fallback: bool = False  # decided by the local fallback while Redis is unreachable
    granted: int = 1  # requests' worth of units the call took: more than 1 for an allowance
    allowance: bool = False  # admitted from an allowance, without a Redis call
    # Shared by decisions whose windows and weight are the same (those the store decides for one route, those
    # served from one allowance): where a reader keeps what it derives from them once rather than per request
    # (the headers' texts, quotas.http.headers). None: nothing shared.
    memo: dict[str, Any] | None = field(default=None, compare=False, repr=False)

    def readings(self) -> list[Reading]:
        """Each window's numbers, in order (what the rate-limit headers show of them)."""
        return [(s.window, s.ok, s.remaining, s.reset_us, s.retry_us, s.quota) for s in self.states]

    def budget_specs(self) -> list[tuple[WindowState, bytes]]:
        """Each budget window's state, and its spec as a settlement sends it: naming the period this decision was
        counted in (its end: the decision's time plus the budget's reset, as Redis answered them).

        That period can end later than the one the spec sent names: the zone moved east (``BUDGET_TIME_ZONE``),
        and the stored day of the old zone, which has not ended, took the request (period.lua). A settlement
        sent with the host's bounds took that day for a later period's and dropped its difference."""
        now_us = round(self.now * US_PER_SECOND)
        return [
            (state, spec_in_period(spec, now_us + state.reset_us))
            for state, spec in zip(self.states, self.specs, strict=True)
            if state.window.is_budget
        ]

    def notes(self) -> tuple[int, bool, list[WindowState]]:
        """What the service does with this decision beyond admitting or refusing: the longest shaping delay (us),
        whether budget thresholds wait to be reported (:attr:`unreported`) and the shadow windows that would
        have refused (:meth:`would_deny`), in one pass over the windows."""
        delay_us, alerting = 0, False
        for state in self.states:
            if state.delay_us > delay_us:  # noqa: PLR1730  (max() is a call; this is a compare)
                delay_us = state.delay_us
            if state.alert:
                alerting = True
        return delay_us, alerting, self.would_deny()

    def units(self, window: Window) -> int:
        """Units this request takes from ``window`` (as decide.lua counts them).

        Period requests and concurrency count requests whatever the weight;
        other windows count the request's weight, else the window's own.
        """
        if window.counts_requests:
            return 1
        return window.weight if self.weight is None else self.weight

    def weighted(self, window: Window) -> bool:
        """Whether ``window`` counts weight units rather than requests for this request.

        A period quota always counts units; another window does when this
        request takes other than one unit from it.
        """
        if window.counts_requests:
            return False
        return window.algorithm == "period_quota" or self.units(window) != 1

    @property
    def unreported(self) -> bool:
        """Whether budget thresholds this decision reached wait to be reported (see quotas.decide.send_alerts)."""
        # A loop, not any() over a generator: the generator's frame costs more than the loop's work.
        for state in self.states:  # noqa: SIM110
            if state.alert:
                return True
        return False

    @property
    def budget_denied(self) -> bool:
        """Whether a money budget is among the windows that refused the request."""
        return any(s.window.is_budget for s in self.denying_states())

    @property
    def delay(self) -> float:
        """Seconds a shaping leaky bucket asks the request to be held."""
        return max((s.delay_us for s in self.states), default=0) / US_PER_SECOND

    def denying_states(self) -> list[WindowState]:
        """Windows that refused the request (shadow windows never refuse)."""
        return [s for s in self.states if not s.ok and not s.window.shadow]

    def would_deny(self) -> list[WindowState]:
        """Shadow windows that would have refused the request."""
        return [s for s in self.states if not s.ok and s.window.shadow]

    def denying_state(self) -> WindowState:
        """The denying window to report: a budget first, else the one with the longest wait."""
        return max(
            self.denying_states(),
            key=lambda s: (s.window.is_budget, math.inf if s.retry_us is None else s.retry_us),
        )

    @property
    def ban_retry_after(self) -> int:
        """Whole seconds until a ban ends."""
        return max(1, math.ceil(self.ban_wait_us / US_PER_SECOND))

    @property
    def retry_after(self) -> int | None:
        """Whole seconds until the same request would be admitted (None if allowed).

        The smallest whole number of seconds covering the longest wait among
        the denying windows, never 0. For a request that can never fit, the
        longest denying window's length.
        """
        if self.allowed:
            return None
        if self.banned or self.ban_started:
            return self.ban_retry_after
        waits = [s.window.window * US_PER_SECOND if s.retry_us is None else s.retry_us for s in self.denying_states()]
        return max(1, math.ceil(max(waits) / US_PER_SECOND))

    def most_restrictive(self) -> WindowState | None:
        """The rate window to show in X-RateLimit-*: the denying one, else the least remaining.

        Budgets count money, not requests, so they are never shown there.
        """
        rate_denials = [s for s in self.denying_states() if not s.window.is_budget]
        if rate_denials:
            return max(rate_denials, key=lambda s: math.inf if s.retry_us is None else s.retry_us)
        enforced = [s for s in self.states if s.window.advertised and s.remaining is not None]
        if not enforced:
            return None
        if len(enforced) == 1:
            return enforced[0]
        return min(enforced, key=lambda s: ((s.remaining or 0) / max(s.quota, 1), -s.reset_us))


def scaled(window: Window, multiplier: float) -> int:
    """The quota of ``window`` under an adaptive multiplier (as decide.lua computes it)."""
    if multiplier == 1.0 or not Algorithm(window.code).rolling:  # periods and budgets are never scaled
        return window.quota
    return max(1, math.floor(window.quota * multiplier))


def committed_spans(windows: Sequence[Window], adjusted: Sequence[Any], added: int, at: float) -> list[Span]:
    """The spans of the windows with a subscription's own thresholds whose committed spend an adjustment
    (adjust.lua's reply, an ``AdjustedBudget`` each, in order) raised by ``added`` (micro-units), at ``at``."""
    if added <= 0:
        return []
    return [
        (w, b.used - added, b.used, w.period_end(at))
        for w, b in zip(windows, adjusted, strict=True)
        if w.alerts and not b.period_ended
    ]


def alerted_states(windows: Sequence[Window], adjusted: Sequence[Any]) -> list[WindowState]:
    """The states of the budgets ``windows`` whose adjustment (adjust.lua's reply, an ``AdjustedBudget`` each, in
    order) newly reached an alert threshold: what a settlement, an owed charge or an allowance's end reports."""
    return [
        WindowState(window=w, ok=True, remaining=None, reset_us=0, retry_us=0, used=b.used, alert=b.alert)
        for w, b in zip(windows, adjusted, strict=True)
        if b.alert and not b.period_ended
    ]


def spec_in_period(spec: bytes, end_us: int) -> bytes:
    """A calendar period's ``spec`` moved to the period that ends at ``end_us`` (the same lengths); ``spec`` itself
    when it names that period already (nearly always)."""
    window = WindowSpec.unpack(spec)
    if window.capacity == end_us:
        return spec
    span, next_span = window.capacity - window.window_us, window.max_delay_us - window.capacity
    return window._replace(window_us=end_us - span, capacity=end_us, max_delay_us=end_us + next_span).pack()
