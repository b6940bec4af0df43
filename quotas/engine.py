"""The quota engine: one object holding everything a decision reads, which the decision service is given.

An :class:`Engine` holds the settings it is configured from, the :class:`~quotas.clock.Clock` every part reads
the time from, its :class:`~quotas.runtime.Runtime` (the store and its guard, the rules cache, the background
work) and the caches the front doors keep per view. The front doors hold one as DRF's throttles hold ``cache``
and ``timer``, a class attribute, :data:`default_engine` unless a subclass or a test names another, and hand it
to the decision service (``quotas.decide.check(engine, facts)``)::

    class PartnerThrottle(QuotaThrottle):
        engine = Engine(clock=ManualClock())

:data:`default_engine` is the process's engine (the platform's apps, the admin and the management commands use
it too). It builds its runtime on first use and rebuilds it when ``QUOTAS`` or ``REST_FRAMEWORK`` changes; a
forked child (a gunicorn worker of a preloading master) builds a runtime of its own on first use. Two engines
in one process are independent: each has its own runtime, store connections, caches and clock (give them
different ``KEY_PREFIX`` values if they share a Redis and must not share counters).
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any

from quotas.clock import SYSTEM_CLOCK, Clock
from quotas.runtime import Runtime, build_runtime, poller
from quotas.settings import QuotaSettings, quota_settings
from quotas.signals import remembered_state_stale


class Engine:
    """What requests are decided with: the rules, one store, one clock (see the module docstring).

    ``settings`` is the settings object the runtime is built from (default: :data:`quotas.settings.quota_settings`);
    ``clock`` is what every part reads the time from (the system's by default; with an injected clock,
    ``clock.injected``, the decisions take its time rather than the Redis server's).
    """

    def __init__(self, *, clock: Clock | None = None, settings: QuotaSettings | None = None) -> None:
        self.settings = quota_settings if settings is None else settings
        self.clock: Clock = SYSTEM_CLOCK if clock is None else clock
        #: The runtime once its background threads run in this process; None before the first :meth:`runtime`,
        #: after :meth:`reset` and in a child just forked. The hot path reads it as ``engine.ready or
        #: engine.runtime()``: a call less on every decision.
        self.ready: Runtime | None = None
        self._runtime: Runtime | None = None
        self._inherited: Runtime | None = None  # in a forked child: the parent's runtime, to start from (_forked)
        self._lock = threading.Lock()
        #: The DRF throttle's per-view memos (quotas.drf.throttling): (throttle class, the view's throttle_classes)
        #: -> the classes one decision serves; (those classes, throttle_scope, authenticated) -> DRF's limits.
        #: As many entries as the code has views; emptied with the runtime when a setting changes.
        self.throttle_partners: dict[tuple[Any, ...], Any] = {}
        self.drf_limits: dict[tuple[Any, ...], Any] = {}
        #: (plan id, view scope) -> the usage field decisions are counted under: as many as the plans times the
        #: scopes the code has (views name them).
        self.usage_fields: dict[tuple[int | None, str], str] = {}
        _ENGINES.add(self)

    def runtime(self) -> Runtime:
        """The engine's runtime, built on first use; its background threads run in every process that uses it."""
        runtime = self._runtime
        if runtime is not None and runtime.poller.pid == poller.current_pid:
            return runtime
        with self._lock:
            if self._runtime is None:
                self._runtime = build_runtime(self.clock, self.settings)
                if self._inherited is not None:
                    self._runtime.carry_over(self._inherited)
                    self._inherited = None
            runtime = self._runtime
            runtime.poller.ensure()
            runtime.folding.ensure()
            self.ready = runtime
        return runtime

    def reset(self) -> None:
        """Close the runtime and forget the caches (a setting changed); the next use builds them again."""
        with self._lock:
            self.ready = self._inherited = None
            old, self._runtime = self._runtime, None
            self.throttle_partners.clear()
            self.drf_limits.clear()
            if old is not None:
                old.close()
        remembered_state_stale.send(sender=Engine)  # blocks learnt from the old runtime's store

    def use_clock(self, clock: Clock | None) -> None:
        """Read the time from ``clock`` from now on (None: the system's clock again), for tests: the runtime is
        rebuilt on it, so every part sees the same moment."""
        self.clock = SYSTEM_CLOCK if clock is None else clock
        self.reset()

    def _forked(self) -> None:
        # A child builds a runtime of its own on first use. Its parent's is the parent's: the units its allowances
        # reserved in Redis (served here too, a limit of 20 admitted 29 between them), its owed spend, and locks
        # its threads may have held at the fork, never released in this process. It is left, not closed: closing
        # would settle what the parent settles (Runtime.at_exit does nothing here either); the child's runtime
        # starts from its rules and lookups (Runtime.carry_over), as a warmed-up parent's child did before.
        if self._runtime is not None:
            self._inherited = self._runtime
        self.ready = self._runtime = None
        self._lock = threading.Lock()


#: Every engine of the process, for the fork hook and a settings change (a registry, held weakly).
_ENGINES: weakref.WeakSet[Engine] = weakref.WeakSet()

#: The process's engine: what every front door holds unless told otherwise.
default_engine = Engine()


def reset_engines() -> None:
    """Reset every engine of the process (``QUOTAS`` or ``REST_FRAMEWORK`` changed: quotas.apps)."""
    for engine in list(_ENGINES):
        engine.reset()


def _after_fork() -> None:
    for engine in list(_ENGINES):
        engine._forked()


os.register_at_fork(after_in_child=_after_fork)
