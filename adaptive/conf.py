"""The adaptive controller's settings, read from ``QUOTAS['ADAPTIVE']`` in Django settings.

Every key is described once in :data:`SETTINGS` (type, default, allowed values, check id, hint, doc):
:data:`adaptive_settings` reads its defaults from it, the check of ``QUOTAS`` validates each value against it at
start-up (the app registers :data:`SECTION`), and the settings reference's table (docs/settings.md) is written
from it. Every attribute is looked up in ``settings.QUOTAS['ADAPTIVE']`` on each access (so
``override_settings`` works and nothing is captured at import time). A key given there replaces the default as a
whole (``SIGNALS`` and ``FLOORS`` too).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.core.checks import CheckMessage, Error, Warning

from quotas.settings import SectionSettings, Setting, defaults
from quotas.settings.registry import app_section

from .hook import check_hook
from .schedule import check_schedule, check_time_zone

#: Signals a host sample carries. Fractions are 0..1; ``redis_ms`` is milliseconds; ``latency`` and ``errors`` are
#: load figures (1.0 = at ``LATENCY_TARGET_MS``, at ``ERROR_RATE_TARGET``: see adaptive/responses.py).
HOST_SIGNALS = ("cpu", "memory", "db", "redis_ms", "latency", "errors")
#: The project's own signal, read by the controller from ``LOAD_HOOK`` once per run (adaptive/hook.py).
HOOK_SIGNAL = "hook"
#: Every signal ``SIGNALS`` may name.
KNOWN_SIGNALS = (*HOST_SIGNALS, HOOK_SIGNAL)
FRACTION_SIGNALS = ("cpu", "memory", "db")
AGGREGATES = ("max", "mean")
#: ``'observe'``: the controller computes and shows its multipliers but publishes none of them (only pins);
#: ``'enforce'``: the engine applies them.
MODES = ("observe", "enforce")

Found = Iterator[str | CheckMessage]


#: The marks every load signal names, from where cutting starts to where only essentials are left.
MARKS = ("low", "high", "critical")


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _reports_at_most_once_a_second(interval: float, label: str) -> Found:
    if 0 < interval < 1:
        yield f"{label} = {interval!r} must be 0 (off) or at least 1 second."


def _outlives_reports(ttl: float, label: str) -> Found:
    report = adaptive_settings.REPORT_INTERVAL
    if _number(report) and report >= 1 and ttl <= report:
        yield Error(
            f"{label} must be longer than REPORT_INTERVAL, or live hosts would drop out.",
            hint="Use about 5 times REPORT_INTERVAL (default 5.0 for 1.0).",
            id="adaptive.E004",
        )


def _outlives_two_runs(ttl: float, label: str) -> Found:
    interval = adaptive_settings.INTERVAL
    if _number(interval) and ttl <= 2 * interval:
        yield Error(
            f"{label} must be longer than two controller intervals.",
            hint="Otherwise the multipliers expire between runs. Default: 60.0 for an INTERVAL of 5.0.",
            id="adaptive.E011",
        )


def _signals(signals: dict[Any, Any], label: str) -> Found:
    if not signals:
        yield f"{label} must name at least one signal."
    for name, marks in signals.items():
        if name not in KNOWN_SIGNALS:
            yield f"{label} names an unknown signal {name!r} (known: {', '.join(KNOWN_SIGNALS)})."
            continue
        values = [marks.get(k) for k in MARKS] if isinstance(marks, dict) else []
        if len(values) != len(MARKS) or not all(_number(v) for v in values):
            yield f"{label}[{name!r}] needs numbers low, high and critical."
            continue
        low, high, critical = (float(v) for v in values if v is not None)
        top = 1 if name in FRACTION_SIGNALS else float("inf")
        if not 0 <= low < high <= critical <= top:
            yield f"{label}[{name!r}] needs 0 <= low < high <= critical" + (" <= 1." if top == 1 else ".")


def _hook(path: str | None, label: str) -> Found:
    yield from check_hook(path, label)
    signals = adaptive_settings.SIGNALS
    named = isinstance(signals, dict) and HOOK_SIGNAL in signals
    if path is not None and not named:
        yield Warning(
            f"{label} is set but SIGNALS has no {HOOK_SIGNAL!r} thresholds: the hook is never called.",
            hint=f"Add '{HOOK_SIGNAL}': {{'low': 0.8, 'high': 1.0, 'critical': 1.5}} to QUOTAS['ADAPTIVE']['SIGNALS'].",
            id="adaptive.W005",
        )
    elif path is None and named:
        yield Warning(
            f"SIGNALS names {HOOK_SIGNAL!r} but {label} is None: that signal is never measured.",
            hint="Set LOAD_HOOK to the dotted path of your load callable, or drop 'hook' from SIGNALS.",
            id="adaptive.W005",
        )


def _floors(floors: dict[Any, Any], label: str) -> Found:
    for slug, floor in floors.items():
        if not isinstance(slug, str) or not _number(floor) or not 0 < floor <= 1:
            yield f"{label}[{slug!r}] = {floor!r} must be in (0, 1]."


_SECONDS = "a number of seconds"
_OPTIONAL_STRING = "None or a string"

#: Every key of QUOTAS['ADAPTIVE'] (the algorithm is in adaptive/policy.py and "Adaptive limits" in docs/concepts.md).
SETTINGS = (
    # The admin's AdaptiveConfig row can switch adaptation off too.
    Setting(
        "ENABLED", bool, True, check_id="adaptive.E010",
        doc="`False` stops adaptation: pinned multipliers are published, else 1.0 (the admin's switch does the "
        "same)",
        hint="False publishes the pinned multipliers, else 1.0.",
    ),
    # Observing is the default: load shedding by the host's CPU acts on customers only once an operator who has
    # watched what it would do (dashboard, quota_adaptive_computed_multiplier) switches it on.
    Setting(
        "MODE", str, "observe", choices=MODES, check_id="adaptive.E021",
        doc="`'observe'` (the default) computes the multipliers and shows them (dashboard, "
        "`quota_adaptive_computed_multiplier`) without applying them; `'enforce'` applies them to the limits. "
        "Pins apply in both modes",
        hint="Watch what the controller would do in 'observe', then set 'enforce' to let it cut limits.",
    ),
    Setting(
        "INTERVAL", float, 5.0, exclusive_minimum=0, kind=_SECONDS, check_id="adaptive.E002",
        doc="seconds between controller runs; use it as the beat schedule (check `adaptive.W003`)",
        hint="Use the same value as the schedule of the adaptive.control beat entry.",
    ),
    Setting(
        "REPORT_INTERVAL", float, 1.0, minimum=0, kind=_SECONDS, validate=_reports_at_most_once_a_second,
        check_id="adaptive.E003",
        doc="seconds between each web process's load samples (≥ 1; 0 turns reporting off)",
        hint="Each web process publishes its load at most once a second; 0 turns reporting off.",
    ),
    Setting(
        "SAMPLE_TTL", float, 5.0, exclusive_minimum=0, kind=_SECONDS, validate=_outlives_reports,
        check_id="adaptive.E002",
        doc="seconds a sample lives; a host silent for longer drops out (must exceed `REPORT_INTERVAL`: "
        "`adaptive.E004`)",
        hint="Use about 5 times REPORT_INTERVAL.",
    ),
    # "low": below it on every signal the fleet is healthy and limits recover; "high": at or above it
    # limits are cut; "critical": cut on every run, ignoring the cooldown. "redis_ms" is the decision
    # round trip in milliseconds.
    Setting(
        "SIGNALS", dict,
        {
            "cpu": {"low": 0.60, "high": 0.80, "critical": 0.95},
            "memory": {"low": 0.80, "high": 0.90, "critical": 0.97},
            "db": {"low": 0.60, "high": 0.85, "critical": 0.97},
        },
        kind="a dict of signal name to thresholds", validate=_signals, check_id="adaptive.E005",
        doc="per signal `{'low', 'high', 'critical'}`; only the signals named are used; add `redis_ms` "
        "(milliseconds) to use Redis latency, `latency` and `errors` (load figures, 1.0 = at target) to use the "
        "p90 response time and the 5xx share, `hook` to use `LOAD_HOOK`",
        hint="Thresholds per signal, 0 <= low < high <= critical (<= 1 for cpu, memory and db); the gap between "
        "low and high keeps limits from flapping.",
    ),
    Setting(
        "LATENCY_TARGET_MS", float, 250.0, exclusive_minimum=0, kind="a number of milliseconds",
        check_id="adaptive.E013",
        doc="the p90 response time a host aims at; the `latency` signal is its p90 over this (1.0 = at target)",
        hint="The p90 response time in milliseconds your API should keep under load.",
    ),
    Setting(
        "ERROR_RATE_TARGET", float, 0.01, exclusive_minimum=0, maximum=1, check_id="adaptive.E014",
        doc="the share of 5xx responses a host aims at; the `errors` signal is its share over this",
        hint="0.01 reads 1 % of responses with status >= 500 as 1.0, at target.",
    ),
    Setting(
        "MIN_RESPONSES", int, 20, minimum=1, check_id="adaptive.E015",
        doc="responses a process must serve in a reporting interval for its `latency` and `errors` to count "
        "(a quiet process reports neither)",
        hint="Fewer responses than this in an interval say nothing: one slow request or one 500 is no load.",
    ),
    Setting(
        "SCHEDULE", list, [], kind="a list of windows", validate=check_schedule, check_id="adaptive.E016",
        doc="planned capacity by time of day: `[{'start': '01:00', 'end': '04:00', 'capacity': 0.5}]` caps the "
        "capacity level at 0.5 from 01:00 to 04:00 (`SCHEDULE_TIME_ZONE`) and recovers it gradually after",
        hint="A list of {'start': 'HH:MM', 'end': 'HH:MM', 'capacity': 0 < c <= 1} that do not overlap.",
    ),
    Setting(
        "SCHEDULE_TIME_ZONE", str | None, None, kind=_OPTIONAL_STRING, validate=check_time_zone,
        check_id="adaptive.E019",
        doc="the time zone of `SCHEDULE`'s times (`None`: Django's `TIME_ZONE`)",
        hint="An IANA time zone name such as 'Europe/Paris', or None for TIME_ZONE.",
    ),
    Setting(
        "LOAD_HOOK", str | None, None, kind=_OPTIONAL_STRING, validate=_hook, check_id="adaptive.E020",
        doc="dotted path of a callable taking no argument and returning the project's own load figure (1.0 = "
        "at target), read once per controller run as the `hook` signal; a failing hook is logged and ignored",
        hint="A dotted path such as 'myproject.load.queue_depth' to a function returning a number >= 0.",
    ),
    Setting(
        "AGGREGATE", str, "max", choices=AGGREGATES, check_id="adaptive.E008",
        doc="how hosts are combined per signal: `'max'` (the worst host decides) or `'mean'`",
        hint="'max' lets the worst host decide.",
    ),
    Setting(
        "DB_SERVER_SIGNAL", bool, True, check_id="adaptive.E010",
        doc="also measure PostgreSQL connections in use against `max_connections`, once per run",
        hint="False leaves the database server out of the load.",
    ),
    Setting(
        "FAST_SECONDS", float, 2.0, minimum=0, kind=_SECONDS, check_id="adaptive.E002",
        doc="time constant of the EWMA that decides cuts (it follows the load both ways)",
        hint="Shorter reacts sooner and to briefer peaks.",
    ),
    # It rises as fast as the other, so a brief dip does not count as recovery.
    Setting(
        "SLOW_SECONDS", float, 20.0, minimum=0, kind=_SECONDS, check_id="adaptive.E002",
        doc="time constant with which the EWMA deciding recovery falls",
        hint="Longer waits for a steadier calm before recovering.",
    ),
    Setting(
        "DECREASE_FACTOR", float, 0.7, exclusive_minimum=0, exclusive_maximum=1, check_id="adaptive.E006",
        doc="multiplicative cut of the capacity level",
        hint="0.7 cuts the capacity level by 30 % at a time.",
    ),
    Setting(
        "DECREASE_COOLDOWN", float, 10.0, minimum=0, kind=_SECONDS, check_id="adaptive.E002",
        doc="seconds between two cuts (time for a cut to show in the load), unless critical",
        hint="Give a cut time to show in the load.",
    ),
    Setting(
        "RECOVERY_DELAY", float, 10.0, minimum=0, kind=_SECONDS, check_id="adaptive.E002",
        doc="seconds every signal must stay below `low` before limits recover",
        hint="Longer waits for a steadier calm before recovering.",
    ),
    Setting(
        "RECOVERY_RATE", float, 0.02, exclusive_minimum=0, kind="a level per second", check_id="adaptive.E006",
        doc="the capacity level regained per second of recovery (0.1 to 1 in 45 s)",
        hint="0.02 takes the level from 0.1 to 1 in 45 s.",
    ),
    Setting(
        "MIN_LEVEL", float, 0.05, exclusive_minimum=0, maximum=1, check_id="adaptive.E006",
        doc="the lowest capacity level; every plan is then at (or near) its floor",
        hint="Capacity is never cut below this level.",
    ),
    Setting(
        "NO_SIGNAL_HOLD", float, 60.0, minimum=0, kind=_SECONDS, check_id="adaptive.E002",
        doc="seconds the multipliers are held when no host reports; then they recover",
        hint="Without samples the controller holds, then recovers.",
    ),
    Setting(
        "DEFAULT_FLOOR", float, 0.1, exclusive_minimum=0, maximum=1, check_id="adaptive.E007",
        doc="the lowest multiplier of a plan not named in `FLOORS`",
        hint="A plan's limits are never cut below this share.",
    ),
    Setting(
        "FLOORS", dict, {"enterprise": 0.8}, kind="a dict of plan slug to floor", validate=_floors,
        check_id="adaptive.E007",
        doc="the lowest multiplier per plan slug",
        hint="Map plan slugs to floors in (0, 1], e.g. {'enterprise': 0.8}.",
    ),
    Setting(
        "PUBLISH_TTL", float, 60.0, exclusive_minimum=0, kind=_SECONDS, validate=_outlives_two_runs,
        check_id="adaptive.E002",
        doc="seconds published multipliers live: if the controller stops, limits return to 1.0 (more than two "
        "`INTERVAL`s: `adaptive.E011`)",
        hint="Use many controller intervals.",
    ),
    Setting(
        "RETENTION_DAYS", int, 7, minimum=1, check_id="adaptive.E009",
        doc="days `AdaptiveSnapshot` rows are kept",
        hint="Snapshots older than this many days are deleted.",
    ),
)  # fmt: skip

#: Every key's default, by name (derived from :data:`SETTINGS`).
DEFAULTS: dict[str, Any] = defaults(SETTINGS)


#: ``QUOTAS['ADAPTIVE']`` itself, registered by :meth:`adaptive.apps.AdaptiveAppConfig.ready`: checked with
#: ``QUOTAS`` (quotas/settings/checking.py), and a table of the settings reference.
SECTION = app_section(
    "adaptive", SETTINGS, "ADAPTIVE", check_id="adaptive.E001", unknown_id="adaptive.W001",
    doc="adaptive limits, read when `adaptive` is installed (its keys below)",
)  # fmt: skip

#: ``QUOTAS['ADAPTIVE']``, key by key, with :data:`DEFAULTS` filled in.
adaptive_settings = SectionSettings("ADAPTIVE", SETTINGS)
