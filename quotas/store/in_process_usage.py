"""Usage the guard counts in this process: what Redis did not count itself (the local fallback's decisions,
refusals answered from memory, requests an allowance served), written to Redis by the poller in batches.

Also giving back what allowances did not use, which goes with their usage.
"""

from __future__ import annotations

import logging

from quotas import metrics
from quotas.contract.protocol import UsageCounter as Counter
from quotas.exceptions import StoreUnavailable
from quotas.store.allowances import Allowance, Allowances
from quotas.store.decision import Decision, Span, WindowState, alerted_states, committed_spans
from quotas.store.interface import Store
from quotas.store.money.budget_day import day_of
from quotas.store.usage_batches import UsageBuffer

logger = logging.getLogger("quotas.store.guard")  # the guard's log, where operators already look


class InProcessUsage:
    """The usage :class:`~quotas.store.guard.Guard` counts in this process (its ``usage``): what the local
    fallback decided, refusals answered from memory, requests an allowance served."""

    def __init__(self, store: Store, allowances: Allowances | None, usage_buffer: UsageBuffer) -> None:
        self.store = store
        self.allowances = allowances
        self.usage_buffer = usage_buffer

    def count_locally(
        self,
        tag: str,
        usage: str | None,
        counter: str,
        amount: int = 1,
        day: str | None = None,
        *,
        since: float | None = None,
    ) -> None:
        """Add ``amount`` to ``tag``'s ``counter`` under ``usage`` ("<plan>|<scope>"; nothing without one) of
        ``day`` (today's by default), for the poller to write (:meth:`flush_usage`)."""
        if usage:
            keys = self.store.keys_of(tag)
            self.usage_buffer.add(keys.usage_base, f"{keys.field_prefix}{usage}|{counter}", amount, day, since=since)

    def flush_usage(self, spool_on_failure: bool = False) -> bool:
        """Add the usage counted in-process to the day's Redis counters; True when all was written.

        On failure the counts are kept for the next try (or, with
        ``spool_on_failure``, as at process exit, written to the spool
        directory for another process to replay).
        """
        if not self.usage_buffer or self.store.usage.write(self.usage_buffer):
            return True
        metrics.observe_redis_error("flush_usage")
        if spool_on_failure:
            self.usage_buffer.spool()
        return False

    def settle_allowances(self, everything: bool = False) -> list[tuple[Decision, list[WindowState], list[Span]]]:
        """Give back what the allowances that are over (or, with ``everything``, all of them) did not use, and
        release what they held in reserve in each budget (the poller's work; everything at shutdown). A failure
        is logged and counted: the client is then held under its limit until the windows move on, never over it.

        Returns, per allowance whose settled spend newly reached a budget's alert threshold (or moved a window
        with a subscription's own thresholds), its decision, those budgets' states and those spans (an
        allowance's grant raises no level: its spend is committed here)."""
        alerted: list[tuple[Decision, list[WindowState], list[Span]]] = []
        if self.allowances is None:
            return alerted
        # What live allowances served so far goes into usage at every tick, not only when they end: usage
        # reaches Redis within about one poller interval of the request (quota_usage_write_lag_seconds), at
        # no cost the request path shows (docs/benchmark-history.md).
        for allowance in self.allowances.live():
            self._count_served(allowance)
        for allowance in self.allowances.ended(everything):
            granted = allowance.granted
            self._count_served(allowance)
            unused = max(allowance.unused, 0)
            rates = [s for s in granted.states if not s.window.is_budget]
            budgets = granted.budget_specs()
            log_at = self.allowances.logged_at(granted)
            try:
                if rates and unused:
                    self.store.refund(granted, rates, times=unused, log_at_us=log_at)
                if budgets and granted.cost_micros:
                    # Its later requests' estimates were reserved at the grant: the unused go back, the rest is
                    # now spent, and the budgets' alert levels follow it.
                    adjusted = self.store.adjust(
                        granted,
                        -unused * granted.cost_micros,
                        [spec for _, spec in budgets],
                        in_usage=False,
                        release=(allowance.size - 1) * granted.cost_micros,
                    )
                    windows = [s.window for s, _ in budgets]
                    states = alerted_states(windows, adjusted)
                    # Its requests' spend, the one that took it included (committed at the grant, reported here:
                    # a grant reports none of a subscription's own thresholds).
                    spans = committed_spans(windows, adjusted, allowance.used * granted.cost_micros, granted.now)
                    if states or spans:
                        alerted.append((granted, states, spans))
            except StoreUnavailable:
                metrics.observe_redis_error("allowance")
                logger.warning("quotas: giving back an allowance of %s failed", granted.tag, exc_info=True)
        return alerted

    def _count_served(self, allowance: Allowance) -> None:
        """Count the requests ``allowance`` admitted since it was last counted (Redis counted the one that took
        it) in the client's usage, as the fallback counts its own: written by the poller with the rest."""
        granted = allowance.granted
        served = allowance.uncounted()
        if not served or not granted.usage:
            return
        # The request's largest weight, as decide.lua counts it ("wx": weight beyond one).
        units = max((granted.units(s.window) for s in granted.states if not s.window.is_budget), default=1)
        day = day_of(granted.now)
        for counter, amount in (
            (Counter.ALLOWED, served),
            (Counter.EXTRA_WEIGHT, served * (units - 1)),
            (Counter.COST, served * granted.cost_micros),
        ):
            if amount:
                # Measured from the allowance's start: the oldest request these counts may hold.
                self.count_locally(granted.tag, granted.usage, counter, amount, day, since=allowance.started)
