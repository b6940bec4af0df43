"""One controller run: read the samples, the plans and the pins, apply :mod:`adaptive.policy`, publish.

The run holds a short Redis lock so that overlapping runs (two workers, a late task) skip instead of
racing on the state. Time is the Redis server's clock, shared by every worker. The database is only
needed for plans, pins and history: when it is unreadable the run goes on with the plans and pins of
the last run that could read it (expired pins dropped), stores no snapshot, and logs why.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfoNotFoundError

from django.conf import settings
from django.db import DatabaseError

from quotas import metrics
from quotas.internal_api import ControllerBoard

from . import store
from .conf import HOOK_SIGNAL, HOST_SIGNALS, adaptive_settings
from .hook import read_hook
from .load import db_server_saturation
from .policy import Fleet, Outcome, Params, PlanInfo, State, Thresholds, aggregate, step
from .publish import publish_multipliers
from .reporter import read_samples
from .schedule import planned_capacity

logger = logging.getLogger(__name__)

PRUNE_EVERY = 3600.0  # seconds between deletions of expired snapshots
#: Each host's response measurements in their own units, kept in the snapshot for the dashboard (the policy
#: reads them as load figures against their targets: ``latency`` and ``errors``).
MEASURED = ("latency_ms", "error_rate")
#: The host label of the signals the controller measures for the whole fleet in /metrics.
FLEET_HOST = "controller"


def params_from_settings() -> Params:
    """The policy's parameters from ``QUOTAS['ADAPTIVE']`` (adaptive.conf)."""
    s = adaptive_settings
    return Params(
        thresholds={
            name: Thresholds(float(t["low"]), float(t["high"]), float(t["critical"])) for name, t in s.SIGNALS.items()
        },
        aggregate=s.AGGREGATE,
        fast_seconds=float(s.FAST_SECONDS),
        slow_seconds=float(s.SLOW_SECONDS),
        decrease_factor=float(s.DECREASE_FACTOR),
        decrease_cooldown=float(s.DECREASE_COOLDOWN),
        recovery_delay=float(s.RECOVERY_DELAY),
        recovery_rate=float(s.RECOVERY_RATE),
        min_level=float(s.MIN_LEVEL),
        no_signal_hold=float(s.NO_SIGNAL_HOLD),
    )


@dataclass(frozen=True, slots=True)
class Inputs:
    """What the database says: plans, active pins by plan id (multiplier, expiry time), the admin's switch."""

    plans: tuple[PlanInfo, ...]
    pins: Mapping[int, tuple[float, float | None]]
    enabled: bool

    def pins_at(self, now: float) -> dict[int, float]:
        """The pins still in force at ``now``."""
        return {plan: m for plan, (m, until) in self.pins.items() if until is None or until > now}

    def to_json(self) -> dict[str, Any]:
        return {"pins": {str(k): list(v) for k, v in self.pins.items()}, "enabled": self.enabled}

    @classmethod
    def cached(cls, plans: tuple[PlanInfo, ...], data: Any) -> Inputs:
        """The inputs of the last run that read the database (for when it cannot be read)."""
        data = data if isinstance(data, dict) else {}
        try:
            pins = {int(k): (float(m), None if t is None else float(t)) for k, (m, t) in data["pins"].items()}
        except (KeyError, TypeError, ValueError, AttributeError):
            pins = {}
        return cls(plans, pins, data.get("enabled") is not False)


def load_inputs(now: float) -> Inputs:
    """Plans with their floors, active pins and the admin switch. Raises ``DatabaseError``."""
    from plans.models import Plan

    from .models import AdaptiveConfig, MultiplierOverride

    floors = adaptive_settings.FLOORS
    default = float(adaptive_settings.DEFAULT_FLOOR)
    plans = tuple(
        PlanInfo(pk, slug, priority, float(floors.get(slug, default)))
        for pk, slug, priority in Plan.objects.order_by("priority", "pk").values_list("pk", "slug", "priority")
    )
    pins: dict[int, tuple[float, float | None]] = {}
    at = datetime.fromtimestamp(now, tz=UTC)
    active = MultiplierOverride.objects.active(at).order_by("created_at", "id")
    for plan_id, multiplier, expires_at in active.values_list("plan_id", "multiplier", "expires_at"):
        pins[plan_id] = (multiplier, expires_at and expires_at.timestamp())  # the latest pin of a plan wins
    return Inputs(plans, pins, AdaptiveConfig.is_enabled())


def run_controller(board: ControllerBoard | None = None, now: float | None = None) -> Outcome | None:
    """Run the controller once; returns its outcome, or None when another run holds the lock.

    ``now`` (seconds since the epoch) replaces the Redis server's clock, for tests.
    Raises :class:`~quotas.exceptions.StoreUnavailable` when Redis is unusable.
    """
    board = board or store.get_board()
    interval = float(adaptive_settings.INTERVAL)
    lock = board.run_lock(timeout=max(1.0, interval * 2))
    if not lock.acquire():
        logger.info("adaptive: another controller run is in progress; skipping")
        return None
    try:
        return _run(board, now)
    finally:
        if not lock.release():
            logger.warning("adaptive: the controller run outlived its lock (%.1f s)", interval * 2)


def _run(board: ControllerBoard, now: float | None) -> Outcome:
    if now is None:
        now = board.server_time()
    stored = _loads_dict(board.state())
    state = State.from_json(stored)
    samples = read_samples(board, now)
    try:
        inputs = load_inputs(now)
    except DatabaseError as exc:
        logger.warning("adaptive: database unreadable, going on with the last plans and pins read: %s", exc)
        inputs = Inputs.cached(state.plans, stored.get("inputs"))
    enabled = bool(adaptive_settings.ENABLED) and inputs.enabled
    server_db = (
        db_server_saturation() if adaptive_settings.DB_SERVER_SIGNAL and "db" in adaptive_settings.SIGNALS else None
    )
    hook = read_hook(adaptive_settings.LOAD_HOOK) if HOOK_SIGNAL in adaptive_settings.SIGNALS else None
    capacity, planned_by = scheduled(now)
    outcome = step(
        state,
        samples,
        inputs.plans,
        now,
        params_from_settings(),
        fleet=Fleet(server_db, {HOOK_SIGNAL: hook}, capacity, planned_by),
        pins=inputs.pins_at(now),
        enabled=enabled,
    )
    outcome.signals["measured"] = aggregate(samples, MEASURED, adaptive_settings.AGGREGATE)
    enforced = adaptive_settings.MODE == "enforce"
    outcome.signals["mode"] = adaptive_settings.MODE
    applied = outcome.multipliers if enforced else observed_only(outcome, inputs.pins_at(now))
    publish_multipliers(board, applied, now, float(adaptive_settings.PUBLISH_TTL))
    export_metrics(outcome, samples, applied)
    new_state = outcome.state.to_json()
    new_state["inputs"] = inputs.to_json()
    new_state["pruned_at"] = _record(outcome, now, stored.get("pruned_at"))
    board.save_state(json.dumps(new_state))
    if outcome.changed or outcome.action in ("cut", "recover"):
        logger.info("adaptive: %s %s%s", outcome.reason, outcome.multipliers, "" if enforced else " (observed only)")
    return outcome


def observed_only(outcome: Outcome, pins: Mapping[int, float]) -> dict[int, float]:
    """What ``'observe'`` mode publishes: 1.0 for every plan but the pinned ones (an operator's own choice), so
    the computed multipliers are shown (snapshot, state, metrics) and never applied."""
    return {p.id: float(pins.get(p.id, 1.0)) for p in outcome.state.plans}


def scheduled(now: float) -> tuple[float | None, str]:
    """The capacity ``SCHEDULE`` plans at ``now`` (None without a schedule) and what plans it, for the reason."""
    schedule = adaptive_settings.SCHEDULE
    if not schedule:
        return None, ""
    zone = adaptive_settings.SCHEDULE_TIME_ZONE or settings.TIME_ZONE
    try:
        capacity, window = planned_capacity(schedule, zone, now)
    except (ZoneInfoNotFoundError, ValueError):  # adaptive.E019 says so at start-up; the run goes on without it
        logger.warning("adaptive: SCHEDULE_TIME_ZONE %r unknown; the schedule is left out", zone)
        return None, ""
    return capacity, f"schedule {window} {zone}" if window else "no window of the schedule"


def export_metrics(outcome: Outcome, samples: list[dict[str, Any]], applied: Mapping[int, float]) -> None:
    """The published (``applied``) and the computed multipliers by plan slug, each host's signals (its worst
    process), and the fleet's own (the hook's figure, the planned capacity) under the host ``controller``, as
    Prometheus gauges."""
    slugs = {p.id: p.slug for p in outcome.state.plans}
    for plan_id, multiplier in applied.items():
        metrics.set_multiplier(slugs.get(plan_id), multiplier)
    for plan_id, multiplier in outcome.multipliers.items():
        metrics.set_computed_multiplier(slugs.get(plan_id), multiplier)
    per_host: dict[tuple[str, str], float] = {}
    for sample in samples:
        host = str(sample.get("host", ""))
        for name in (*HOST_SIGNALS, *MEASURED):
            value = sample.get(name)
            if isinstance(value, int | float) and not isinstance(value, bool):
                per_host[host, name] = max(per_host.get((host, name), value), value)
    for (host, name), value in per_host.items():
        metrics.set_load_signal(name, host, value)
    hook = outcome.signals["observed"].get(HOOK_SIGNAL)
    if hook is not None:
        metrics.set_load_signal(HOOK_SIGNAL, FLEET_HOST, hook)
    planned = outcome.signals.get("planned")
    if planned is not None:
        metrics.set_load_signal("capacity", FLEET_HOST, planned["capacity"])


def _record(outcome: Outcome, now: float, pruned_at: Any) -> float | None:
    """Store a snapshot of a change and delete expired ones now and then; returns the last prune time."""
    from .models import AdaptiveSnapshot

    at = datetime.fromtimestamp(now, tz=UTC)
    try:
        if outcome.changed:
            AdaptiveSnapshot.objects.create(
                created_at=at,
                level=outcome.state.level,
                signals=outcome.signals,
                multipliers={str(k): v for k, v in outcome.multipliers.items()},
                reason=outcome.reason,
            )
        if not isinstance(pruned_at, int | float) or now - pruned_at >= PRUNE_EVERY:
            cutoff = at - timedelta(days=int(adaptive_settings.RETENTION_DAYS))
            deleted, _ = AdaptiveSnapshot.objects.filter(created_at__lt=cutoff).delete()
            if deleted:
                logger.info("adaptive: deleted %d snapshots older than %s", deleted, cutoff)
            return now
    except DatabaseError as exc:
        logger.warning("adaptive: snapshot not stored: %s", exc)
    return pruned_at if isinstance(pruned_at, int | float) else None


def read_state(board: ControllerBoard) -> dict[str, Any]:
    """The controller's stored state as JSON (for the dashboard and tests)."""
    return _loads_dict(board.state())


def _loads_dict(raw: bytes | str | None) -> dict[str, Any]:
    if raw is None:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        logger.warning("adaptive: unreadable controller state; starting afresh")
        return {}
    return value
