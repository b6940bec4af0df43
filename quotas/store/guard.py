"""The store as the service uses it: what Redis is spared, and what happens while it is away.

:class:`Guard` wraps a store (:class:`~quotas.store.interface.Store`) with
what a store must not know about:

* busy clients' local allowances (:mod:`quotas.store.allowances`), so most of
  their requests need no Redis call while every limit stays exact;
* a memory of clients refused recently (:mod:`quotas.store.deny_memory`), so
  a flood past a limit is refused until its retry time without touching Redis;
* a circuit breaker (:mod:`quotas.store.breaker`), so an outage costs one
  timeout, not one per request;
* the local fallback (:mod:`quotas.store.fallback`): this process's share of
  each limit, and usage counted in-process (:mod:`quotas.store.usage_batches`)
  until Redis is back, when the budget spend it admitted is charged to Redis
  (:mod:`quotas.store.money.owed`).

By job: this module decides (allowances, the memory of refused clients, the
breaker and the failure mode); the guard holds its other parts as objects:
``guard.settlement`` (:mod:`quotas.store.money.settlement`) what follows the view
(refund, cost adjustment, lease release, a shaped request taken back, budget
spend owed to Redis: best effort, a failure is logged and counted, never
raised), and ``guard.usage`` (:mod:`quotas.store.in_process_usage`) the usage
counted in this process and its flush.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from quotas import metrics
from quotas.clock import SYSTEM_CLOCK, Clock
from quotas.contract.protocol import UsageCounter as Counter
from quotas.exceptions import ScriptFailed, StoreUnavailable
from quotas.rules.limits import Window
from quotas.store.allowances import Allowances
from quotas.store.breaker import CircuitBreaker
from quotas.store.decision import DecideCall, Decision
from quotas.store.deny_memory import DenyMemory
from quotas.store.fallback import LocalLimiter
from quotas.store.in_process_usage import InProcessUsage
from quotas.store.interface import Store
from quotas.store.money.owed import OwedSpend
from quotas.store.money.settlement import Settlement
from quotas.store.replies import banned_states
from quotas.store.usage_batches import UsageBuffer

logger = logging.getLogger(__name__)


class Guard:
    """A :class:`~quotas.store.interface.Store` behind a memory of refused clients, a circuit breaker and the
    local fallback. What it does after the view is its ``settlement``'s
    (:class:`~quotas.store.money.settlement.Settlement`), and the usage it counts in this process its ``usage``'s
    (:class:`~quotas.store.in_process_usage.InProcessUsage`)."""

    def __init__(
        self,
        store: Store,
        *,
        deny_memory_size: int,
        probe_interval: float,
        local_share: float,
        allowances: Allowances | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.store = store
        self.allowances = allowances
        self.clock = clock
        self._monotonic = clock.monotonic  # bound once: time.monotonic itself in production
        self.deny_memory = DenyMemory(deny_memory_size, clock)
        self.breaker = CircuitBreaker(probe_interval, clock)
        self.fallback = LocalLimiter(local_share, deny_memory_size, clock)
        self.usage_buffer = UsageBuffer(clock)
        self.owed = OwedSpend(deny_memory_size)
        self.usage = InProcessUsage(store, allowances, self.usage_buffer)
        self.settlement = Settlement(store, allowances, self.fallback, self.owed, self.usage)

    # The decision: decide() by keyword for tests and operators, decide_call() and adecide() for the service.

    def decide(  # noqa: PLR0913
        self,
        tag: str,
        windows: Sequence[Window],
        weight: int | None = None,
        *,
        now: float | None = None,
        cost_micros: int = 0,
        usage: str | None = None,
        peek: bool = False,
        multiplier: float = 1.0,
        ban_policy: str = "",
        request_id: str = "",
    ) -> Decision:
        """Check and consume ``weight`` in every window for client ``tag``, atomically.

        The options are :class:`~quotas.store.decision.DecideCall`'s. Raises
        :class:`StoreUnavailable` when Redis fails.
        """
        call = DecideCall(
            tag=tag, windows=windows, weight=weight, now=now, cost_micros=cost_micros, usage=usage, peek=peek,
            multiplier=multiplier, ban_policy=ban_policy, request_id=request_id,
        )  # fmt: skip
        return self.decide_call(call)

    def decide_call(self, call: DecideCall) -> Decision:
        """The decision on ``call``: from an allowance, remembered, else Redis's. Raises
        :class:`StoreUnavailable` when Redis fails."""
        here = self._answered_here(call)
        if here is not None:
            return here
        # Before Redis decided: an allowance's lifetime counts from here, so it ends earlier by the round trip
        # (a cost within the noise: docs/benchmark-history.md).
        asked = self._monotonic()
        try:
            decision = self.store.decide(call)
        except StoreUnavailable as exc:
            raise self._failed(call.tag, exc) from exc
        return self._learn(call, decision, asked)

    async def adecide(self, call: DecideCall) -> Decision:
        """:meth:`decide_call` from asyncio: only the round trip is awaited."""
        here = self._answered_here(call)
        if here is not None:
            return here
        asked = self._monotonic()
        try:
            decision = await self.store.adecide(call)
        except StoreUnavailable as exc:
            raise self._failed(call.tag, exc) from exc
        return self._learn(call, decision, asked)

    def peek(self, tag: str, windows: Sequence[Window], multiplier: float = 1.0) -> Decision:
        """The client's standing in ``windows`` (rolling rates scaled by the adaptive ``multiplier``, as its
        decisions are) without consuming or counting anything."""
        return self.decide(tag, windows, weight=0, peek=True, multiplier=multiplier)

    def _answered_here(self, call: DecideCall) -> Decision | None:
        """The decision this process makes without Redis: from the client's allowance, or a refusal it
        remembers; else None, the call set to ask for the allowance a busy client wants. Raises
        :class:`StoreUnavailable` while the circuit breaker is open."""
        # One function rather than a helper per step, and the memory of refusals passed by while it is empty: calls
        # less on every decision. A one-off question at another moment (now=) or an operator's peek is asked of
        # Redis as it is; a test that moves the engine's clock (quotas.clock) takes this path, allowances and
        # remembered refusals included.
        own = call.now is None and not call.peek
        allowances = self.allowances
        if own and allowances is not None and call.allowance_ok:
            served = allowances.take(call)  # else call.allowance asks for one when the client is busy here
            if served is not None:
                return served  # counted in the client's usage when the allowance is settled (settle_allowances)
        if own and self.deny_memory.entries:
            remembered = self._remembered(call)
            if remembered is not None:
                return remembered
        if self.breaker.opened_at is not None and not self.breaker.allow():
            raise StoreUnavailable("circuit breaker open: Redis was unreachable moments ago")
        return None

    def _remembered(self, call: DecideCall) -> Decision | None:
        """The refusal this process remembers for ``call.tag``, if any."""
        tag, windows, weight = call.tag, call.windows, call.weight
        banned_for = self.deny_memory.banned(tag)
        if banned_for:
            self.usage.count_locally(tag, call.usage, Counter.DENIED_BANNED)
            states, now = banned_states(windows, banned_for, call.multiplier), self.clock.now()
            return Decision(
                allowed=False, states=states, now=now, weight=weight, local=True, tag=tag, banned=True,
                ban_wait_us=banned_for,
            )  # fmt: skip
        # With escalation on, refusals must reach Redis to be counted toward a ban
        # (which is then remembered here); a flood costs at most the ban threshold.
        refused = [] if call.ban_policy else self.deny_memory.check(tag, windows, weight)
        if refused:
            self.usage.count_locally(tag, call.usage, Counter.DENIED_RATE)
            return Decision(allowed=False, states=refused, now=self.clock.now(), weight=weight, local=True, tag=tag)
        return None

    def _failed(self, tag: str, exc: StoreUnavailable) -> StoreUnavailable:
        """``exc``, counted and logged; an outage (not a script's error) opens the breaker."""
        if isinstance(exc, ScriptFailed):
            # A bug or bad state of this client's keys, not an outage: this request alone gets the
            # failure mode; the breaker (every other client) is left alone.
            metrics.observe_redis_error("script")
            logger.error("quotas: the decision script failed for %s: %s", tag, exc)
            return exc
        self.breaker.failure()
        metrics.observe_redis_error("decide")
        return exc

    def _learn(self, call: DecideCall, decision: Decision, asked: float | None = None) -> Decision:
        """Note what ``decision`` teaches: Redis is up, what an outage may still spend, who to refuse locally."""
        if self.breaker.opened_at is not None:  # success() has nothing to do while the breaker is closed
            self.breaker.success()
        if call.now is not None or call.peek:
            return decision  # a test's or an operator's question: nothing to remember
        tag = call.tag
        if not decision.banned:
            # A loop, not any() over a generator: the generator's frame costs more than the loop's work. The states
            # are read only where a window has a period (a decision makes them when first read: StatesOnRead).
            for window in call.windows:
                if window.period:
                    self.fallback.remember(tag, decision.states, decision.now)  # what an outage may still spend
                    break
        if decision.granted > 1 and self.allowances is not None:
            return self.allowances.grant(call, decision, asked)  # admitted: no refusal to remember
        if not decision.allowed or decision.ban_started:
            self._remember_refusal(call, decision)
        return decision

    def _remember_refusal(self, call: DecideCall, decision: Decision) -> None:
        """Remember a ban, or the windows that refused ``call`` until their retry time (see DenyMemory)."""
        if decision.banned or decision.ban_started:
            self.deny_memory.ban(call.tag, decision.ban_wait_us)
        elif not decision.reduced_only and not call.ban_policy:
            for state in decision.denying_states():
                # A period's refusal may end with a reconciliation, and a concurrency limit's with any request
                # of the client finishing (its lease released): neither has a retry time to remember.
                if not state.window.period and state.window.algorithm != "concurrency":
                    weight = state.window.weight if call.weight is None else call.weight
                    self.deny_memory.remember(call.tag, state, weight)

    # While Redis is away.

    def decide_locally(
        self,
        tag: str,
        windows: Sequence[Window],
        weight: int | None,
        cost_micros: int,
        usage: str | None,
        *,
        multiplier: float = 1.0,
    ) -> Decision:
        """Decide in this process (failure mode ``local``), counting usage for later."""
        decision = self.fallback.decide(tag, windows, weight, cost_micros, multiplier)
        if decision.allowed and cost_micros:
            self.settlement.owe_locally(decision, cost_micros)  # Redis is charged this spend once it answers (owed.py)
        if not usage:
            return decision
        decision.usage = usage  # where a reconciliation adds what the actual cost differs by
        if decision.allowed:
            units = weight if weight is not None else max((w.weight for w in windows if not w.period), default=1)
            for counter, amount in (
                (Counter.ALLOWED, 1),
                (Counter.EXTRA_WEIGHT, units - 1),
                (Counter.COST, cost_micros),
            ):
                if amount:
                    self.usage.count_locally(tag, usage, counter, amount)
        else:
            self.usage.count_locally(
                tag, usage, Counter.DENIED_BUDGET if decision.budget_denied else Counter.DENIED_RATE
            )
        return decision

    def count_acl(
        self, tag: str, usage: str | None, allowed: bool, weight: int | None, cost_micros: int
    ) -> Decision | None:
        """Count a request an allow or deny list decided (no limits involved).

        Returns the decision of an allowed request, which is settled after the
        view like any other; None when nothing is counted (no usage field).
        While Redis is unreachable the count is kept in-process.
        """
        if not usage:
            return None
        try:
            return self.store.count(tag, usage, allowed=allowed, weight=weight, cost_micros=cost_micros)
        except StoreUnavailable:
            metrics.observe_redis_error("count_acl")
            logger.warning("quotas: counting an ACL decision for %s in-process: Redis failed", tag, exc_info=True)
        if not allowed:
            self.usage.count_locally(tag, usage, Counter.DENIED_ACL)
            return None
        return self.decide_locally(tag, (), weight, cost_micros, usage)

    def probe(self) -> bool:
        """While the breaker is open, ask Redis whether it is back (the poller's job); True when Redis is up."""
        if not self.breaker.is_open:
            return True
        if not self.store.ping():
            return False
        self.breaker.success()
        self.fallback.clear()
        return True

    @property
    def mode(self) -> str:
        """``normal``, or ``breaker_open`` while Redis is treated as down."""
        return "breaker_open" if self.breaker.is_open else "normal"

    def forget(self) -> None:
        """Forget the refused clients this process remembers (every limit is asked of Redis again), and end
        the allowances (the rules they were taken under may have changed; the poller gives them back)."""
        self.deny_memory.clear()
        if self.allowances is not None:
            self.allowances.end_all()
