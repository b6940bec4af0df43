"""The checks of ``manage.py quota_doctor``: each finds ``ok``, ``warning`` or ``error``, with one line saying why.

Unlike the system checks (``manage.py check``, which never connect), these
talk to Redis and load the rules from the database: what an operator asks
after a deployment or during an incident. Every Redis server a decision may
run on is asked: the one server, the primary behind the Sentinels, or every
primary of a cluster.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from django.apps import AppConfig, apps
from django.core import checks
from django.db import DEFAULT_DB_ALIAS, DatabaseError

from quotas.engine import default_engine
from quotas.exceptions import RulesUnavailable, StoreUnavailable
from quotas.formats.store_urls import describe
from quotas.runtime import Runtime
from quotas.settings import quota_settings
from quotas.store.primaries import Primary

OK, WARNING, ERROR = "ok", "warning", "error"
_RANK = {OK: 0, WARNING: 1, ERROR: 2}
#: Seconds this machine's clock and Redis's may differ before the doctor warns.
MAX_SKEW = 1.0
#: The oldest Redis the engine runs on (see docs/algorithms.md: functions from 7, EVALSHA on 6.2).
OLDEST_REDIS = (6, 2)
#: The apps of this product, as INSTALLED_APPS names them (the packages pyproject.toml ships; a test compares).
#: The doctor reports the system checks of those installed, whose ids begin with the app's name or label
#: (``adaptive.E002``, ``quota_plans.W001``).
PRODUCT_APPS = ("quotas", "plans", "usage", "adaptive", "dashboard", "notifications", "console")


@dataclass(frozen=True, slots=True)
class Finding:
    """What one check found."""

    name: str
    status: str  # OK, WARNING or ERROR
    detail: str  # one line

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


def examine() -> list[Finding]:
    """Every check, in order: Redis, the Lua library, the clocks, the rules, then the system checks."""
    try:
        runtime: Runtime | None = default_engine.runtime()
    except StoreUnavailable as exc:  # a cluster of which no startup node answers: no client to build
        runtime, unreachable = None, f"no client: {exc}"
    except ValueError as exc:  # a malformed REDIS_URL (the message never repeats it)
        runtime, unreachable = None, f"REDIS_URL is not usable: {exc}"
    else:
        unreachable = ""
    if runtime is not None and runtime.store.primaries.in_process:
        memory = Finding("redis", WARNING, "memory (this process only): every process counts alone and a restart "
                         "forgets; for tests and development, not production")  # fmt: skip
        return [memory, check_rules(runtime), check_failure_mode(), *check_django()]
    nodes = runtime.store.primaries.all() if runtime is not None else []
    redis, versions = check_redis(nodes, unreachable)
    found = [redis]
    if redis.status == ERROR or runtime is None:
        found += [Finding(name, ERROR, "not checked: Redis is unreachable") for name in ("library", "clock")]
    else:
        found += [check_library(nodes, versions), check_clock(nodes, runtime.clock.now)]
    found += [check_rules(runtime), check_failure_mode()]
    return found + check_django()


def worst(findings: list[Finding]) -> str:
    """The most serious status among ``findings``."""
    return max((f.status for f in findings), key=_RANK.__getitem__, default=OK)


def _on(name: str) -> str:
    return f" on {name}" if name else ""


def check_redis(nodes: list[Primary], unreachable: str = "") -> tuple[Finding, dict[str, tuple[int, ...]]]:
    """PING and INFO server on every primary: reachable, and which Redis. Also returns each node's version."""
    topology = describe(str(quota_settings.REDIS_URL))
    if unreachable:
        return Finding("redis", ERROR, f"{topology}: {unreachable}"), {}
    versions: dict[str, tuple[int, ...]] = {}
    slowest = 0.0
    for node in nodes:
        try:
            started = time.perf_counter()
            node.ping()
            slowest = max(slowest, time.perf_counter() - started)
            versions[node.name] = node.version()
        except StoreUnavailable as exc:
            return Finding("redis", ERROR, f"{topology}: PING failed{_on(node.name)}: {exc.__cause__ or exc}"), {}
    shown = ", ".join(sorted({".".join(map(str, v)) for v in versions.values()}))
    ping = f"{slowest * 1000:.1f} ms"
    answered = f"{len(nodes)} primaries answered PING in {ping} at most" if len(nodes) > 1 else f"PING in {ping}"
    detail = f"{topology}: {answered}; Redis {shown}"
    old = sorted(name or "the server" for name, v in versions.items() if v < OLDEST_REDIS)
    if old:
        return Finding("redis", ERROR, f"{detail}; older than 6.2, which the quotas need ({', '.join(old)})"), versions
    return Finding("redis", OK, detail), versions


def check_library(nodes: list[Primary], versions: dict[str, tuple[int, ...]]) -> Finding:
    """Whether each primary has this release's Lua: its function library (Redis 7+), else the decide script
    (Redis 6.2, called by EVALSHA). Not there yet is a warning: the first decision there loads it."""
    missing, notes = [], set()
    for node in nodes:
        name = node.name
        try:
            loaded, how = node.has_library(versions.get(name, ()) >= (7,))
        except StoreUnavailable as exc:
            return Finding("library", ERROR, f"could not ask{_on(name)}: {exc.__cause__ or exc}")
        notes.add(how)
        if not loaded:
            missing.append(name or "the server")
    how = "; ".join(sorted(notes))
    if missing:
        where = ", ".join(missing)
        return Finding("library", WARNING, f"{how}: not loaded on {where} yet (the first decision there loads it)")
    return Finding("library", OK, f"{how}: loaded" + (f" on all {len(nodes)} primaries" if len(nodes) > 1 else ""))


def check_clock(nodes: list[Primary], clock: Callable[[], float]) -> Finding:
    """Redis's TIME against ``clock`` (the engine's: this machine's in production), on every primary; a warning
    past :data:`MAX_SKEW`.

    Windows, bans and retry times run on Redis's clock; calendar periods' bounds, the day of usage counters and
    API keys' expiry on this machine's: the two must agree.
    """
    skews = {}
    for node in nodes:
        try:
            before = clock()
            server = node.time()
            after = clock()
        except StoreUnavailable as exc:
            return Finding("clock", ERROR, f"TIME failed{_on(node.name)}: {exc.__cause__ or exc}")
        skews[node.name] = server - (before + after) / 2
    name, skew = max(skews.items(), key=lambda item: abs(item[1]))
    way = "ahead of" if skew > 0 else "behind"
    if abs(skew) > MAX_SKEW:
        return Finding(
            "clock", WARNING, f"Redis's clock{_on(name)} is {abs(skew):.1f} s {way} this machine's (TIME against "
            "the engine's clock): calendar periods and usage days would start at different moments; sync both with NTP"
        )  # fmt: skip
    return Finding("clock", OK, f"Redis's clock is within {abs(skew) * 1000:.0f} ms of this machine's (TIME)")


def check_rules(runtime: Runtime | None) -> Finding:
    """The rules version in Redis, and whether a rules snapshot loads from the backend (the database)."""
    if runtime is None:
        return Finding("rules", ERROR, "not checked: without Redis there is no engine to load them")
    try:
        version = runtime.store.rules_version.read()
    except StoreUnavailable:
        version = ""
    try:
        rules = runtime.rules.current()
    except RulesUnavailable as exc:
        return Finding("rules", ERROR, f"the rules snapshot does not load: {exc.detail}")
    except Exception as exc:  # a backend's bug: reported like the rest, not a traceback in place of the report
        return Finding("rules", ERROR, f"the rules snapshot does not load: {type(exc).__name__}: {exc}")
    if runtime.rules.backend is None:
        loaded = "no RULES_BACKEND, so DRF's rates apply"
    else:
        default = rules.plans.get(rules.default_plan_id) if rules.default_plan_id is not None else None
        limits = sum(len(p.limits) for p in rules.plans.values())
        loaded = (
            f"the snapshot loads: {len(rules.plans)} plan(s), {limits} limit(s), "
            f"default plan {default.slug if default else 'none'}"
        )
    if not version:
        return Finding("rules", WARNING, f"rules version unreadable (Redis unreachable); {loaded}")
    return Finding("rules", OK, f"rules version {version}; {loaded}")


#: What each failure mode does while Redis is unreachable, in the doctor's words.
FAILURE_MODE_EFFECTS = {
    "local": "each process enforces its own share (LOCAL_SHARE) of every limit in memory and answers requests",
    "open": "every request is admitted, unlimited",
    "closed": "every limited request is refused with 503 problem+json",
}


def check_failure_mode() -> Finding:
    """What happens while Redis is unreachable (never a problem in itself: ``quotas.W004`` warns if unchosen)."""
    mode = str(quota_settings.FAILURE_MODE)
    chosen = "FAILURE_MODE" in (quota_settings.user_settings() or {})
    how = "set in QUOTAS" if chosen else "the default, not chosen in QUOTAS"
    return Finding("failure_mode", OK, f"while Redis is unreachable, '{mode}' ({how}): {FAILURE_MODE_EFFECTS[mode]}")


def installed_product_apps() -> list[AppConfig]:
    """The installed apps of this product, in the order of INSTALLED_APPS."""
    return [config for config in apps.get_app_configs() if config.name in PRODUCT_APPS]


def check_django() -> list[Finding]:
    """The system checks of every installed app of this product (database checks included), one finding per
    message."""
    installed = installed_product_apps()
    prefixes = tuple({f"{name}." for config in installed for name in (config.name, config.label)})
    skipped = []
    try:
        messages = checks.run_checks(databases=[DEFAULT_DB_ALIAS])
    except DatabaseError as exc:  # a database check could not connect: the others still say something
        messages = checks.run_checks()
        skipped = [Finding("django", WARNING, f"database checks not run: the database failed ({exc})".strip())]
    serious = [m for m in messages if m.level >= checks.WARNING and str(m.id or "").startswith(prefixes)]
    if not serious and not skipped:
        names = [config.name for config in installed]
        listed = ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else names[0]
        return [Finding("django", OK, f"the system checks of {listed} report nothing")]
    return skipped + [
        Finding(
            f"django {m.id}",
            ERROR if m.is_serious() else WARNING,
            " ".join(f"{m.msg}{f' Hint: {m.hint}' if m.hint else ''}".split()),
        )
        for m in serious
    ]
