"""What the guard does after the view answered: best effort, a failure is logged and counted, never raised.

A refund of what a failed request consumed, the actual cost in place of the
estimate (once), the end of a request's concurrency leases, and taking back a
decision this process could not honour (no room to shape it).

An actual cost is never lost: when Redis fails at settlement, or the decision
was the local fallback's, the difference goes into the usage counted in this
process and into the ledger of budget spend Redis has not seen yet
(:mod:`quotas.store.money.owed`), both written by the poller once Redis answers.
"""

from __future__ import annotations

import logging
import uuid

from quotas import metrics
from quotas.contract.protocol import UsageCounter as Counter
from quotas.exceptions import ScriptFailed, StoreUnavailable
from quotas.store.allowances import Allowances
from quotas.store.decision import Decision, Span, WindowState, alerted_states, committed_spans
from quotas.store.fallback import LocalLimiter
from quotas.store.in_process_usage import InProcessUsage
from quotas.store.interface import Store
from quotas.store.money.budget_day import day_of
from quotas.store.money.owed import Owed, OwedSpend
from quotas.store.money.owed_spool import replay_owed, spool_owed

logger = logging.getLogger("quotas.store.guard")  # the guard's log, where operators already look


class Settlement:
    """What :class:`~quotas.store.guard.Guard` does after the view (its ``settlement``); a decision of the local
    fallback moves the usage counted in this process (``usage``) too."""

    def __init__(
        self,
        store: Store,
        allowances: Allowances | None,
        fallback: LocalLimiter,
        owed: OwedSpend,
        usage: InProcessUsage,
    ) -> None:
        self.store = store
        self.allowances = allowances
        self.fallback = fallback
        self.owed = owed
        self.usage = usage

    def refund(self, decision: Decision, only_refundable: bool = True) -> None:
        """Give back what an admitted ``decision`` consumed (every window, or only those that refund errors)."""
        states = [s for s in decision.states if s.ok and (s.window.refund_on_error or not only_refundable)]
        if not decision.allowed or decision.local or not states:
            return
        # A request from an allowance: its sliding-log units were recorded at the allowance's end.
        log_at = self.allowances.logged_at(decision) if decision.allowance and self.allowances else None
        # A period quota's thresholds the request reached and has not reported go back with its units (the
        # stored level too: refund.lua), so it never reports them: the request that reaches them again does.
        # Budgets' are adjust.lua's, at the release of the estimate (reconcile).
        own = [s.alert if s.window.period and not s.window.is_budget else 0 for s in states]
        try:
            self.store.refund(decision, states, log_at_us=log_at, own=own)
        except StoreUnavailable:
            metrics.observe_redis_error("refund")
            logger.warning("quotas: refund for %s failed", decision.tag, exc_info=True)
            return
        for state, mask in zip(states, own, strict=True):
            if mask:
                state.alert = 0

    def reconcile(self, decision: Decision, actual_micros: int) -> list[WindowState] | None:
        """Replace an admitted decision's estimated cost with the actual one, once.

        Returns the budget states whose alert thresholds were newly reached, or None when Redis did not take the
        settlement (it waits in the ledger of owed spend, whose charge reports what it reaches). Each budget's
        state takes its settled spend and the thresholds the request now reports (see adjust.lua).
        """
        if decision.reconciled or not decision.allowed:
            return []
        decision.reconciled = True
        delta = actual_micros - decision.cost_micros
        if decision.local:
            self._reconcile_locally(decision, delta)
            decision.cost_micros = actual_micros
            return []
        budgets = decision.budget_specs()
        if delta == 0 or (not budgets and not decision.usage):
            return []
        # This settlement's id: Redis takes it once, so a retry after a reply lost to a timeout charges nothing.
        settlement = uuid.uuid4().hex
        try:
            # The thresholds it reached are reported at settlement: those its settled spend falls below go back.
            own = [state.alert for state, _ in budgets]
            specs = [spec for _, spec in budgets]
            adjusted = self.store.adjust(decision, delta, specs, own=own, settlement=settlement)
        except StoreUnavailable:
            self._keep_for_later(decision, delta, budgets, settlement)
            adjusted = None
        decision.cost_micros = actual_micros
        if delta > 0 and budgets and self.allowances is not None:
            # The client's allowances were sized by the estimate: past it, requests must be charged in Redis
            # again, so a budget is never overspent by more than the documented bound (the in-flight requests'
            # actual minus estimate). Their unused units go back with the poller's next visit.
            self.allowances.end_client(decision.tag)
        if adjusted is None:
            return None
        alerted = []
        for (state, _), budget in zip(budgets, adjusted, strict=False):
            if budget.period_ended:  # nothing was changed
                continue
            state.used, state.alert = budget.used, budget.alert
            if state.alert:
                alerted.append(state)
        return alerted

    def _keep_for_later(
        self, decision: Decision, delta: int, budgets: list[tuple[WindowState, bytes]], settlement: str
    ) -> None:
        """Redis failed at settlement: the decision stays reconciled here, and the settlement itself (budgets
        and usage, under its id) waits in the ledger for the poller. Redis may have taken it and only the reply
        been lost: the retry then changes nothing (adjust.lua), so the request is charged once either way."""
        metrics.observe_redis_error("reconcile")
        logger.warning("quotas: reconciling the cost of %s failed; kept for the poller", decision.tag, exc_info=True)
        windows, specs = [s.window for s, _ in budgets], [spec for _, spec in budgets]
        # The thresholds the decision reached go with the settlement, reported by its charge with the spend then
        # settled: Redis may have run it (a lost reply), and its retry answers them again, so reporting them here
        # too sent them twice; or it did not, and its first run reports those the settled spend still reaches.
        own = [state.alert for state, _ in budgets]
        for state, _ in budgets:
            state.alert = 0
        self.owed.owe(
            decision.tag,
            windows,
            specs,
            decision.now,
            delta,
            settlement=settlement,
            usage=decision.usage or "",
            own=own,
        )

    def _reconcile_locally(self, decision: Decision, delta: int) -> None:
        """A decision of the local fallback (Redis away): its budgets here and its usage counted here move by
        ``delta`` too, so usage records actual costs and a failed view releases its estimate."""
        if not delta:
            return
        budgets = [s.window for s in decision.states if s.window.is_budget]
        if budgets:
            self.fallback.adjust(decision.tag, budgets, delta, decision.now)
            self.owe_locally(decision, delta)
        if decision.usage:
            self.usage.count_locally(decision.tag, decision.usage, Counter.COST, delta, day_of(decision.now))

    def owe_locally(self, decision: Decision, micros: int) -> None:
        """Keep ``micros`` a local ``decision`` spent of the budgets it was admitted by, for Redis to be charged
        once it answers (the fallback spends its share without Redis knowing)."""
        budgets = [s.window for s in decision.states if s.window.is_budget and s.ok]
        self.owed.owe(decision.tag, budgets, [w.spec_at(decision.now) for w in budgets], decision.now, micros)

    def charge_owed(self) -> list[tuple[str, list[WindowState], float, list[Span]]]:
        """Charge Redis the budget spend it has not seen (the poller's work, once Redis answers).

        Returns, per charge that newly reached a budget's alert threshold (or
        raised the spend of a window with a subscription's own thresholds),
        the client's tag, those budgets' states, the decision's time and those
        spans (for :func:`~quotas.observability.events.fire_budget_alerts`). An entry whose
        charge fails is kept for the next try, but for a script's refusal (the
        client's keys in a bad state), which is dropped and counted.
        """
        alerted = []
        entries = self.owed.take()
        for i, entry in enumerate(entries):
            try:
                adjusted = self.store.adjust(
                    self._owed(entry),
                    entry.micros,
                    list(entry.specs),
                    in_usage=bool(entry.usage),
                    own=entry.own,
                    settlement=entry.settlement,
                )
            except ScriptFailed:
                metrics.observe_redis_error("owed")
                logger.error("quotas: charging %s's owed budget spend failed; dropped", entry.tag, exc_info=True)
                self.owed.drop(entry)
                continue
            except StoreUnavailable:
                metrics.observe_redis_error("owed")
                logger.warning("quotas: charging owed budget spend failed; kept for the next try", exc_info=True)
                self.owed.keep(entries[i:])
                break
            states = alerted_states(entry.windows, adjusted)
            spans = committed_spans(entry.windows, adjusted, entry.micros, entry.now)
            if states or spans:
                alerted.append((entry.tag, states, entry.now, spans))
        return alerted

    def spool_owed(self) -> None:
        """At exit, Redis still away: what the ledger still owes goes to a signed spool file, charged by the next
        process whose poller finds Redis up (:mod:`quotas.store.money.owed_spool`). Without a usable spool directory
        the budget part is given up (counted in ``quota_owed_spend_dropped_micros_total``) and a failed
        settlement's usage joins the usage buffer's spool."""
        entries = self.owed.take()
        try:
            if spool_owed(entries) is not None:
                return
        except OSError:
            logger.exception("quotas: spooling %d owed budget charges failed", len(entries))
        for entry in entries:
            if entry.usage:
                self.usage.count_locally(entry.tag, entry.usage, Counter.COST, entry.micros, day_of(entry.now))
            self.owed.drop(entry)

    def replay_owed(self) -> list[tuple[str, list[WindowState], float, list[Span]]]:
        """Charge what processes that exited with Redis away spooled (the poller's work once Redis answers):
        each entry once, by its settlement id. Returns, as :meth:`charge_owed` does, the charges that newly
        reached a budget's alert threshold."""
        alerted = []

        def charge(entry: Owed) -> None:
            adjusted = self.store.adjust(
                self._owed(entry), entry.micros, list(entry.specs), in_usage=bool(entry.usage),
                own=entry.own, settlement=entry.settlement,
            )  # fmt: skip
            states = alerted_states(entry.windows, adjusted) if entry.windows else []
            spans = committed_spans(entry.windows, adjusted, entry.micros, entry.now) if entry.windows else []
            if states or spans:
                alerted.append((entry.tag, states, entry.now, spans))

        replay_owed(charge)
        return alerted

    @staticmethod
    def _owed(entry: Owed) -> Decision:
        """The decision ``entry`` charges as, for :meth:`~quotas.store.interface.Store.adjust`: its client and time."""
        return Decision(allowed=True, states=[], now=entry.now, tag=entry.tag, usage=entry.usage)

    def release(self, decision: Decision) -> None:
        """End the concurrency leases an admitted decision holds."""
        if not decision.request_id or not decision.allowed:
            return
        try:
            self.store.release(decision)
        except StoreUnavailable:
            metrics.observe_redis_error("release")
            # The lease runs out on its own; the client is only limited a little longer.
            logger.warning("quotas: releasing the leases of %s failed", decision.tag, exc_info=True)

    def withdraw(self, decision: Decision, refused_as: Counter = Counter.DENIED_CAPACITY) -> None:
        """Take back an admitted ``decision`` whose request was then refused: by this process (no room to shape
        it: ``refused_as`` capacity, "dc"), or by another decision on the same request (a later throttle class:
        a rate, "dr").

        Its units go back to every window, its estimated cost is released, and
        its usage moves from admitted to ``refused_as``.
        """
        if not decision.allowed or decision.local:
            return
        self.refund(decision, only_refundable=False)
        if decision.cost_micros:
            self.reconcile(decision, 0)
        if decision.usage:
            rate_windows = [s.window.weight for s in decision.states if not s.window.period]
            units = decision.weight if decision.weight is not None else max(rate_windows, default=1)
            day = day_of(decision.now)
            for counter, amount in (
                (Counter.ALLOWED, -1),
                (Counter.EXTRA_WEIGHT, 1 - units),
                (refused_as, 1),
            ):
                if amount:
                    self.usage.count_locally(decision.tag, decision.usage, counter, amount, day)
