"""This process's quota machinery, built from ``settings.QUOTAS`` on first use.

A :class:`Runtime` holds what lives as long as the process: the rules
cache, the store and its guard, the adaptive multipliers, the notes written off
the request path (history, last refusals, keys' last use) and the poller
thread that writes them, and the :class:`~quotas.clock.Clock` every part of
it reads the time from (``runtime.clock``). An :class:`~quotas.engine.Engine`
builds its runtime with :func:`build_runtime` on first use, and again after a
settings change.
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Sequence

from django.utils.module_loading import import_string

from quotas import metrics
from quotas.clock import SYSTEM_CLOCK, Clock
from quotas.contract.keys import subscription_id
from quotas.exceptions import StoreUnavailable
from quotas.observability.events import fire_budget_alerts
from quotas.observability.history import History
from quotas.observability.ledger import FOLD_EVERY, LEDGER
from quotas.observability.refusals import RefusalLog
from quotas.rules.limits import Window
from quotas.runtime import shaping
from quotas.runtime.key_use import KeyUse
from quotas.runtime.multipliers import Multipliers
from quotas.runtime.poller import Poller
from quotas.runtime.rules_cache import RulesCache
from quotas.settings import QuotaSettings, quota_settings
from quotas.signals import remembered_state_stale
from quotas.store.allowances import Allowances
from quotas.store.back_office import BackOffice
from quotas.store.controller_board import ControllerBoard, controller_board
from quotas.store.guard import Guard
from quotas.store.interface import Store
from quotas.store.opening import open_store


class Runtime:
    """The rules cache, the store and its guard, and the background work of one process.

    ``guard`` (:class:`~quotas.store.guard.Guard`) is what decides: the store behind the memory of refused
    clients, the circuit breaker, the local fallback and allowances. ``store``
    (:class:`~quotas.store.interface.Store`) is the store alone, for operators' calls that must reach
    Redis (lifting a ban, clearing a client) and, through its parts, for the notes the poller writes.
    """

    def __init__(
        self,
        store: Store,
        rules: RulesCache,
        guard: Guard,
        interval: float,
        *,
        clock: Clock = SYSTEM_CLOCK,
        redis_url: str | None = None,
        board_timeout: float = 2.0,
    ) -> None:
        self.clock = clock  # what every part reads the time from (see quotas.clock)
        self.store = store
        self.prefix = store.prefix
        self.rules = rules
        self.guard = guard
        self.multipliers = Multipliers()
        self.history = History(clock)
        self.refusals = RefusalLog(clock=clock)  # each client's last refusals, for operators
        self.key_use = KeyUse(clock)
        self.shaping = shaping.ShapingBudget(clock)  # the sleep this process may spend holding shaped requests
        self.poller = Poller(interval, self.tick)
        # Under PROMETHEUS_MULTIPROC_DIR a scrape folds only the ledger of the process serving it: every other
        # process folds its own on this thread, apart from the tick (whose Redis calls may stall, or which may be
        # off), so that a decision reaches /metrics within METRICS_DELAY (quotas/observability/ledger.py).
        self.folding = Poller(FOLD_EVERY if metrics.multiprocess_dir() else 0, LEDGER.fold, "quota-ledger-fold")
        self.back_office = BackOffice(redis_url or quota_settings.REDIS_URL, store.prefix)  # the platform's apps' reads
        self._board_of = (redis_url or quota_settings.REDIS_URL, board_timeout)
        self._board: ControllerBoard | None = None
        self._board_lock = threading.Lock()
        rules.on_reload = self._rules_changed
        #: The process this runtime belongs to: a forked child inherits the object (and its atexit entry) with
        #: its parent's allowances and owed spend, which are the parent's to settle (see at_exit).
        self.pid = os.getpid()
        atexit.register(self.at_exit)

    def carry_over(self, parent: Runtime) -> None:
        """In a forked child, before its first use: decide from where ``parent`` (the runtime the child inherited,
        whose allowances, owed spend and locks stay its parent's) had got to: its rules, lookups and multipliers."""
        self.rules.carry_over(parent.rules)
        self.multipliers.by_plan = dict(parent.multipliers.by_plan)

    def forget(self) -> None:
        """Drop what this process remembers from Redis (refused clients, blocks): the rules or a ban changed."""
        self.guard.forget()
        remembered_state_stale.send(sender=Runtime)

    def _rules_changed(self) -> None:
        # A reload (the first among them) also reads the multipliers, so the first request decides with them.
        self.multipliers.refresh(self.store.multipliers)
        self.forget()

    def tick(self) -> None:
        """The poller's work: the rules version and multipliers, probe Redis while down, then write what was
        held (usage, keys' last use, the history, the last refusals), each kept for the next tick if its write
        fails."""
        # Decisions recorded since the last tick reach the metrics within a tick, Redis up or not (and sooner
        # under PROMETHEUS_MULTIPROC_DIR: self.folding); the history is folded as it is written.
        LEDGER.fold()
        self.rules.poll()
        if self.multipliers.refresh(self.store.multipliers):
            self.forget()
        if not self.guard.probe():
            return
        # Allowances that ended give back what they did not use before the owed spend is charged: the budget
        # alerts that charge fires then see the spend admitted, not units an ended allowance held.
        self.settle_allowances()
        self.charge_owed()
        self.replay_owed()
        if self.guard.usage.flush_usage():
            self.store.usage.replay_spool()  # a file Redis did not take stays for the next tick
        try:
            self.key_use.write(self.store.key_use)
        except StoreUnavailable:
            metrics.observe_redis_error("key_use")
        try:
            self.history.write(self.store.history)
        except StoreUnavailable:
            metrics.observe_redis_error("history")
        self.refusals.write(self.store.refusals)  # counts and logs its own errors, keeps what failed

    def settle_allowances(self, everything: bool = False) -> None:
        """End the allowances that are over (all of them at exit), and send the budget alerts their spend, now
        committed, newly reached (an allowance's grant reports none: what it reserved was not spent yet)."""
        for granted, states, spans in self.guard.usage.settle_allowances(everything):
            fire_budget_alerts(granted.tag, subscription_id(granted.tag), states, granted.now, spans)

    def charge_owed(self) -> None:
        """Charge Redis the budget spend this process admitted or settled while it was away, and send the
        alerts that spend newly reached (once per threshold and period, as after a request)."""
        for tag, states, at, spans in self.guard.settlement.charge_owed():
            fire_budget_alerts(tag, subscription_id(tag), states, at, spans)

    def replay_owed(self) -> None:
        """Charge what processes that exited during an outage still owed (their spool files), and send the
        alerts that spend newly reached, as :meth:`charge_owed` does for this process's own."""
        for tag, states, at, spans in self.guard.settlement.replay_owed():
            fire_budget_alerts(tag, subscription_id(tag), states, at, spans)

    def lift_ban(self, tag: str) -> bool:
        """End ``tag``'s ban now (and its refusal count); every process forgets it within a second.

        Raises :class:`~quotas.exceptions.StoreUnavailable` when Redis fails.
        """
        lifted = self.store.lift_ban(tag)
        self.rules.invalidate()  # other processes drop their remembered refusals and bans
        return lifted

    def reset_client(self, tag: str, windows: Sequence[Window] | None = None, keep: Sequence[Window] = ()) -> int:
        """Delete ``tag``'s counters: all of them with its ban and refusal count, or only those of ``windows``,
        but those of ``keep`` (see :meth:`~quotas.store.redis_store.RedisStore.clear`); every process forgets
        what it remembers of it within a second. Returns how many fields and keys were deleted.

        Raises :class:`~quotas.exceptions.StoreUnavailable` when Redis fails.
        """
        deleted = self.store.clear(tag, windows, keep)
        self.rules.invalidate()  # every process drops its remembered refusals, bans and allowances
        return deleted

    def at_exit(self) -> None:
        """A graceful shutdown's work (atexit runs it): unused allowances go back, usage counted here is written
        (or spooled for another process to replay when Redis is away), owed budget spend is charged or spooled.
        Nothing in a process forked from the one that built the runtime: what it holds is its parent's, which
        settles it once itself (a child giving back its parent's unused units too would let the limit admit
        more than it allows)."""
        if os.getpid() != self.pid:
            return
        self.settle_allowances(everything=True)
        # Budget spend Redis has not seen: one try; what still fails is spooled for the next process to charge.
        self.charge_owed()
        self.guard.settlement.spool_owed()
        self.guard.usage.flush_usage(spool_on_failure=True)

    def controller_board(self) -> ControllerBoard:
        """The adaptive controller's board in this runtime's Redis, on a client of its own made on first use
        (a run's reads wait longer than a request's)."""
        with self._board_lock:
            if self._board is None:
                url, timeout = self._board_of
                self._board = controller_board(url, self.prefix, timeout)
            return self._board

    def close(self) -> None:
        """Stop background work, count what is buffered, and drop connections."""
        self.poller.stop()
        self.folding.stop()
        self.at_exit()
        atexit.unregister(self.at_exit)
        self.store.close()
        self.back_office.close()


def build_runtime(clock: Clock = SYSTEM_CLOCK, settings: QuotaSettings = quota_settings) -> Runtime:
    """A runtime configured from ``settings`` (``settings.QUOTAS``), reading the time from ``clock``."""
    url, timeout = settings.REDIS_URL, float(settings.SOCKET_TIMEOUT)
    connect_timeout = float(settings.CONNECT_TIMEOUT)
    prefix, buckets = settings.KEY_PREFIX, int(settings.KEY_BUCKETS)
    store = open_store(url, prefix, buckets, timeout, connect_timeout, clock=clock)
    backend_path = settings.RULES_BACKEND
    interval = float(settings.RULES_CHECK_INTERVAL)
    rules = RulesCache(
        import_string(backend_path)() if backend_path else None,
        store.rules_version,
        interval,
        int(settings.CLIENT_CACHE_SIZE),
        clock=clock,
    )
    guard = Guard(
        store,
        deny_memory_size=int(settings.LOCAL_DENY_CACHE_SIZE),
        probe_interval=float(settings.PROBE_INTERVAL),
        local_share=float(settings.LOCAL_SHARE),
        allowances=_allowances(clock, settings),
        clock=clock,
    )
    return Runtime(
        store,
        rules,
        guard,
        interval,
        clock=clock,
        redis_url=settings.REDIS_URL,
        board_timeout=float(settings.SOCKET_TIMEOUT) * 4,  # a controller's run is not a request
    )


def _allowances(clock: Clock, settings: QuotaSettings) -> Allowances | None:
    """Local allowances as ``QUOTAS['ALLOWANCES']`` configures them (None when off, or without a poller:
    it gives back what they did not use and writes their usage, so with ``RULES_CHECK_INTERVAL`` 0 they are off)."""
    conf = settings.ALLOWANCES
    if not conf["ENABLED"] or float(settings.RULES_CHECK_INTERVAL) <= 0:
        return None
    return Allowances(
        horizon=float(conf["HORIZON"]),
        min_rate=float(conf["MIN_RATE"]),
        share=float(conf["SHARE"]),
        max_requests=int(conf["MAX_REQUESTS"]),
        clock=clock,
    )
