"""The control rule: load samples in, one multiplier per plan out. Pure: no I/O, time is passed in.

Each run of :func:`step`:

1. **Observe.** Hosts' samples are merged per host (the worst process of a host), then across hosts
   (``max``: the worst host decides, or ``mean``). A signal no host reports (SQLite has no pool) is
   *unavailable*, never zero load, and simply takes no part in the decision.
2. **Smooth.** Each signal feeds two EWMAs weighted by the time since the last run,
   ``alpha = 1 - exp(-dt / tau)``, so the rule behaves the same whatever the controller's interval:
   *fast* (``fast_seconds`` both ways) follows the load and decides cuts, so a cut that worked stops
   the next one; *slow* rises as fast but falls with ``slow_seconds``, and decides recovery, so a
   brief dip never counts as recovery.
3. **Classify** with hysteresis: *critical* (a fast signal at or above its critical mark),
   *overloaded* (at or above high), *healthy* (every slow signal below low), else *elevated*.
4. **AIMD on one capacity level** in ``[min_level, 1]``: overloaded multiplies it by
   ``decrease_factor`` at most once per ``decrease_cooldown`` (critical: on every run); healthy for
   ``recovery_delay`` seconds adds ``recovery_rate`` per second; elevated holds it. A load hovering at
   one threshold can only ever move the level one way, so it cannot flap.
5. **Shed by priority.** With ``n`` priority tiers (lowest rank 0), tier ``r`` starts losing capacity
   once the shed amount ``1 - level`` passes ``r / n``, and reaches its plan's floor at level 0:
   the lowest priority is cut first and most, the highest last and least, never below its floor.
6. **Planned capacity** (``SCHEDULE``, :mod:`adaptive.schedule`) caps the level: entering a window cuts it to
   the window's capacity at once (a planned cut needs no cooldown), inside it the level never recovers above
   it, and when the window ends the level recovers like after any cut: gradually, once every signal is healthy.
7. **Pins** from the admin replace a plan's computed value; with adaptation off every other plan is 1.0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

HEALTHY, ELEVATED, OVERLOADED, CRITICAL, UNKNOWN = "healthy", "elevated", "overloaded", "critical", "unknown"
_ZONE_RANK = {HEALTHY: 0, ELEVATED: 1, OVERLOADED: 2, CRITICAL: 3}


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Where a signal stops being healthy (``low``), where cuts start (``high``) and ``critical``."""

    low: float
    high: float
    critical: float


@dataclass(frozen=True, slots=True)
class Params:
    """The controller's parameters (``adaptive.conf`` documents each)."""

    thresholds: Mapping[str, Thresholds]
    aggregate: str = "max"
    fast_seconds: float = 2.0
    slow_seconds: float = 20.0
    decrease_factor: float = 0.7
    decrease_cooldown: float = 10.0
    recovery_delay: float = 10.0
    recovery_rate: float = 0.02
    min_level: float = 0.05
    no_signal_hold: float = 60.0


@dataclass(frozen=True, slots=True)
class PlanInfo:
    """A plan as the controller sees it."""

    id: int
    slug: str
    priority: int
    floor: float


@dataclass(slots=True)
class State:
    """What the controller remembers between runs (stored in Redis as JSON)."""

    level: float = 1.0
    fast: dict[str, float] = field(default_factory=dict)  # per signal: the EWMA that decides cuts
    slow: dict[str, float] = field(default_factory=dict)  # per signal: the envelope that decides recovery
    at: float | None = None  # time of the last run
    last_cut_at: float | None = None
    healthy_since: float | None = None
    last_signal_at: float | None = None
    multipliers: dict[int, float] = field(default_factory=dict)  # as last published
    plans: tuple[PlanInfo, ...] = ()  # as last known (used while the database is unreadable)

    def to_json(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "fast": self.fast,
            "slow": self.slow,
            "at": self.at,
            "last_cut_at": self.last_cut_at,
            "healthy_since": self.healthy_since,
            "last_signal_at": self.last_signal_at,
            "multipliers": {str(k): v for k, v in self.multipliers.items()},
            "plans": [[p.id, p.slug, p.priority, p.floor] for p in self.plans],
        }

    @classmethod
    def from_json(cls, data: Any) -> State:
        """The state in ``data``; a fresh state if it is missing or unreadable."""
        if not isinstance(data, dict):
            return cls()
        try:
            return cls(
                level=float(data.get("level", 1.0)),
                fast={str(k): float(v) for k, v in (data.get("fast") or {}).items()},
                slow={str(k): float(v) for k, v in (data.get("slow") or {}).items()},
                at=_opt_float(data.get("at")),
                last_cut_at=_opt_float(data.get("last_cut_at")),
                healthy_since=_opt_float(data.get("healthy_since")),
                last_signal_at=_opt_float(data.get("last_signal_at")),
                multipliers={int(k): float(v) for k, v in (data.get("multipliers") or {}).items()},
                plans=tuple(PlanInfo(int(i), str(s), int(p), float(f)) for i, s, p, f in data.get("plans") or ()),
            )
        except (TypeError, ValueError):
            return cls()


@dataclass(frozen=True, slots=True)
class Fleet:
    """What the controller measures once per run for the whole fleet rather than per host."""

    server_db: float | None = None  # the database server's own saturation, merged with the hosts' pools'
    signals: Mapping[str, float | None] = field(default_factory=dict)  # by name (the hook's); None: unavailable
    capacity: float | None = None  # planned now (None: no schedule, read as 1.0); caps the level
    planned_by: str = "the schedule"  # what plans it, for the reason


@dataclass(frozen=True, slots=True)
class Outcome:
    """The result of one run: what to publish, and why."""

    state: State
    multipliers: dict[int, float]
    changed: bool  # the multipliers differ from the last published ones
    action: str  # "cut", "recover", "hold" or "off"
    zone: str
    reason: str
    signals: dict[str, Any]  # observed and smoothed values, for the snapshot


def aggregate(samples: Iterable[Mapping[str, Any]], names: Iterable[str], how: str = "max") -> dict[str, float | None]:
    """Per signal in ``names``: the fleet's value, or None when no host reports it.

    Processes of one host (samples with the same ``host``) count once, by their worst value.
    Values that are not finite non-negative numbers are ignored.
    """
    names = tuple(names)
    hosts: dict[str, dict[str, float]] = {}
    for sample in samples:
        merged = hosts.setdefault(str(sample.get("host", "")), {})
        for name in names:
            value = sample.get(name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                continue
            if value >= 0:
                merged[name] = max(merged.get(name, 0.0), float(value))
    out: dict[str, float | None] = {}
    for name in names:
        values = [host[name] for host in hosts.values() if name in host]
        if not values:
            out[name] = None
        elif how == "mean":
            out[name] = sum(values) / len(values)
        else:
            out[name] = max(values)
    return out


def observe(samples: list[Mapping[str, Any]], params: Params, fleet: Fleet) -> dict[str, float | None]:
    """Per signal of ``params.thresholds``: the hosts' value (:func:`aggregate`), the database server's merged
    into ``db``, and the fleet's own signals in place of the hosts' (None: unavailable)."""
    observed = aggregate(samples, params.thresholds, params.aggregate)
    if fleet.server_db is not None and "db" in observed:
        observed["db"] = max(fleet.server_db, observed["db"] or 0.0)
    for name, value in fleet.signals.items():
        if name in observed:
            observed[name] = value
    return observed


def ewma(previous: float | None, value: float, dt: float | None, tau: float) -> float:
    """One EWMA step weighted by the ``dt`` seconds elapsed: ``alpha = 1 - exp(-dt / tau)``."""
    if previous is None or dt is None:
        return value
    alpha = 1.0 if tau <= 0 else 1.0 - math.exp(-max(dt, 0.0) / tau)
    return previous + alpha * (value - previous)


def classify(
    fast: Mapping[str, float], slow: Mapping[str, float], thresholds: Mapping[str, Thresholds]
) -> tuple[str, str | None]:
    """The fleet's zone and the signal that put it there (None when healthy or unknown).

    Critical and overloaded are read on the fast signals, healthy needs every slow one below low.
    """
    if not fast:
        return UNKNOWN, None
    zone, culprit = HEALTHY, None
    for name, value in fast.items():
        t = thresholds[name]
        if value >= t.critical:
            here = CRITICAL
        elif value >= t.high:
            here = OVERLOADED
        elif max(value, slow.get(name, value)) >= t.low:
            here = ELEVATED
        else:
            here = HEALTHY
        if _ZONE_RANK[here] > _ZONE_RANK[zone]:
            zone, culprit = here, name
    return zone, culprit


def plan_multipliers(level: float, plans: Iterable[PlanInfo]) -> dict[int, float]:
    """Each plan's multiplier at capacity ``level`` (see step 5 of the module docstring)."""
    plans = tuple(plans)
    tiers = sorted({p.priority for p in plans})
    shed = min(1.0, max(0.0, 1.0 - level))
    out = {}
    for plan in plans:
        start = tiers.index(plan.priority) / len(tiers)
        depth = min(1.0, max(0.0, (shed - start) / (1.0 - start)))
        out[plan.id] = max(plan.floor, round(1.0 - (1.0 - plan.floor) * depth, 2))
    return out


def step(
    state: State,
    samples: Iterable[Mapping[str, Any]],
    plans: Iterable[PlanInfo],
    now: float,
    params: Params,
    *,
    fleet: Fleet | None = None,
    pins: Mapping[int, float] | None = None,
    enabled: bool = True,
) -> Outcome:
    """One controller run at time ``now`` (seconds) on the hosts' ``samples``.

    ``fleet`` is what the controller measured for the whole fleet (:class:`Fleet`), ``pins`` the admin's
    multipliers by plan id, ``enabled`` False switches adaptation off.
    """
    samples = list(samples)
    plans = tuple(plans)
    pins = dict(pins or {})
    fleet = fleet or Fleet()
    observed = observe(samples, params, fleet)
    dt = None if state.at is None else now - state.at
    fast, slow = {}, {}
    for name, value in observed.items():
        if value is None:
            continue  # unavailable: no part in the decision, and its history is dropped
        fast[name] = ewma(state.fast.get(name), value, dt, params.fast_seconds)
        previous = state.slow.get(name)
        rising = previous is None or value > previous
        slow[name] = ewma(previous, value, dt, params.fast_seconds if rising else params.slow_seconds)
    zone, culprit = classify(fast, slow, params.thresholds)
    new = replace(state, fast=fast, slow=slow, at=now, plans=plans)
    if fast:
        new.last_signal_at = now
    run = _Run(state, new, now, dt, params)
    action, why = _control(run, zone, culprit, enabled)
    if enabled and fleet.capacity is not None:
        action, why = _cap(run, fleet.capacity, fleet.planned_by, action, why)

    computed = plan_multipliers(new.level, plans) if enabled else {p.id: 1.0 for p in plans}
    multipliers = {p.id: float(pins.get(p.id, computed[p.id])) for p in plans}
    new.multipliers = multipliers
    if pins:
        by_id = {p.id: p.slug for p in plans}
        pinned = ", ".join(f"{by_id[i]}={m:.2f}" for i, m in sorted(pins.items()) if i in by_id)
        if pinned:
            why += f"; pinned: {pinned}"
    signals = {
        "hosts": len({str(s.get("host", "")) for s in samples}),
        "observed": observed,
        "fast": {k: round(v, 4) for k, v in fast.items()},
        "slow": {k: round(v, 4) for k, v in slow.items()},
        "zone": zone,
        "level": round(new.level, 4),
    }
    if fleet.capacity is not None:
        signals["planned"] = {"capacity": fleet.capacity, "by": fleet.planned_by}
    return Outcome(new, multipliers, multipliers != state.multipliers, action, zone, why, signals)


@dataclass(frozen=True, slots=True)
class _Run:
    """One run of :func:`step`: the state it started from, the state it builds, its time and parameters."""

    old: State
    new: State
    now: float
    dt: float | None  # seconds since the last run, None on the first
    p: Params


#: Seconds of recovery too small to move the level (rounding, not time spent healthy).
_NO_GAIN = 1e-6


def _control(run: _Run, zone: str, culprit: str | None, enabled: bool) -> tuple[str, str]:
    """Moves ``run.new.level`` (and the timers) for ``zone``; returns the action and its reason."""
    new = run.new
    if not enabled:
        new.level, new.last_cut_at, new.healthy_since = 1.0, None, None
        return "off", "adaptation off: pinned multipliers, else 1.0"
    if zone == HEALTHY:
        return _healthy(run)
    new.healthy_since = None
    if culprit is None:  # unknown: classify() names the signal of every other zone
        return _no_signal(run)
    if zone == ELEVATED:
        value = max(new.fast[culprit], new.slow.get(culprit, 0.0))
        return "hold", f"hold: {culprit} {value:.2f} between low and high"
    return _cut(run, zone, culprit)


def _cut(run: _Run, zone: str, culprit: str) -> tuple[str, str]:
    """Overloaded or critical because of ``culprit``: a multiplicative cut, unless at the floor or cooling down."""
    old, new, p = run.old, run.new, run.p
    level = old.level
    t = p.thresholds[culprit]
    mark = f"{culprit} {new.fast[culprit]:.2f} >= "
    mark += f"critical {t.critical:.2f}" if zone == CRITICAL else f"high {t.high:.2f}"
    if level <= p.min_level:
        return "hold", f"hold at the lowest level {level:.2f}: {mark}"
    if zone == OVERLOADED and old.last_cut_at is not None and run.now - old.last_cut_at < p.decrease_cooldown:
        return "hold", f"hold: {mark}, giving the last cut time to act"
    new.level = max(p.min_level, level * p.decrease_factor)
    new.last_cut_at = run.now
    return "cut", f"cut: {mark}; level {level:.2f} -> {new.level:.2f}"


def _cap(run: _Run, capacity: float, planned_by: str, action: str, why: str) -> tuple[str, str]:
    """Keeps the level at or below the planned ``capacity`` (never below ``min_level``)."""
    old, new = run.old, run.new
    ceiling = max(run.p.min_level, min(1.0, capacity))
    if new.level <= ceiling:
        return action, why
    new.level = ceiling
    if old.level > ceiling:
        new.last_cut_at = run.now  # like any cut, it is given time to show before the load cuts again
        return "cut", f"cut: planned capacity {ceiling:.2f} ({planned_by}); level {old.level:.2f} -> {ceiling:.2f}"
    return "hold", f"hold at planned capacity {ceiling:.2f} ({planned_by}); {why}"


def _healthy(run: _Run) -> tuple[str, str]:
    """Every signal below low: recovery once it has lasted ``recovery_delay`` seconds."""
    old = run.old
    since = run.new.healthy_since = old.healthy_since if old.healthy_since is not None else run.now
    why = f"every signal below low for {run.now - since:.0f} s"
    return _recover(run, since + run.p.recovery_delay, why)


def _no_signal(run: _Run) -> tuple[str, str]:
    """No host reports load: hold, then recover once nothing has been heard for ``no_signal_hold`` seconds."""
    last = run.old.last_signal_at
    if last is None:
        return "hold", "no host reports load yet"
    why = f"no host has reported for {run.now - last:.0f} s"
    return _recover(run, last + run.p.no_signal_hold, why)


def _recover(run: _Run, start: float, why: str) -> tuple[str, str]:
    """Additive increase for the time since ``start`` within the last ``run.dt`` seconds."""
    level, new = run.old.level, run.new
    if level >= 1.0:
        return "hold", f"full capacity: {why}"
    gain = min(run.dt or 0.0, run.now - start)
    if gain <= _NO_GAIN:
        return "hold", f"hold: {why}, recovery starts after {start - run.now:.0f} s more"
    new.level = min(1.0, level + run.p.recovery_rate * gain)
    return "recover", f"recover: {why}; level {level:.2f} -> {new.level:.2f}"


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)
