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
from typing import Any

from django.apps import AppConfig, apps
from django.core import checks
from django.db import DEFAULT_DB_ALIAS, DatabaseError
from redis.cluster import RedisCluster
from redis.exceptions import ResponseError

from quotas.contract.connect import STORE_ERRORS, describe
from quotas.contract.library import library_name
from quotas.contract.memory import MemoryRedis
from quotas.exceptions import RulesUnavailable, StoreUnavailable
from quotas.runtime import Runtime, get_runtime
from quotas.settings import quota_settings
from quotas.store.transport import Transport

OK, WARNING, ERROR = "ok", "warning", "error"
_RANK = {OK: 0, WARNING: 1, ERROR: 2}
#: Seconds this machine's clock and Redis's may differ before the doctor warns.
MAX_SKEW = 1.0
#: The oldest Redis the engine runs on (see docs/algorithms.md: functions from 7, EVALSHA on 6.2).
OLDEST_REDIS = (6, 2)
#: The apps of this product, as INSTALLED_APPS names them (the packages pyproject.toml ships; a test compares).
#: The doctor reports the system checks of those installed, whose ids begin with the app's name or label
#: (``adaptive.E002``, ``quota_plans.W001``).
PRODUCT_APPS = ("quotas", "plans", "usage", "adaptive", "dashboard", "notifications")

#: This machine's clock, compared with Redis's TIME (a seam: a test sets it off to see the warning).
clock: Callable[[], float] = time.time

Node = tuple[str, Any]  # a primary's name ("" for the one server) and a redis-py client of it alone


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
        runtime: Runtime | None = get_runtime()
    except StoreUnavailable as exc:  # a cluster of which no startup node answers: no client to build
        runtime, unreachable = None, f"no client: {exc}"
    except ValueError as exc:  # a malformed REDIS_URL (the message never repeats it)
        runtime, unreachable = None, f"REDIS_URL is not usable: {exc}"
    else:
        unreachable = ""
    if runtime is not None and isinstance(runtime.redis, MemoryRedis):
        memory = Finding("redis", WARNING, "memory (this process only): every process counts alone and a restart "
                         "forgets; for tests and development, not production")  # fmt: skip
        return [memory, check_rules(runtime), check_failure_mode(), *check_django()]
    nodes = primaries(runtime.redis) if runtime is not None else []
    redis, versions = check_redis(nodes, unreachable)
    found = [redis]
    if redis.status == ERROR or runtime is None:
        found += [Finding(name, ERROR, "not checked: Redis is unreachable") for name in ("library", "clock")]
    else:
        transport = runtime.store.transport
        assert isinstance(transport, Transport)  # a memory store returned above
        found += [check_library(nodes, versions, transport), check_clock(nodes)]
    found += [check_rules(runtime), check_failure_mode()]
    return found + check_django()


def worst(findings: list[Finding]) -> str:
    """The most serious status among ``findings``."""
    return max((f.status for f in findings), key=_RANK.__getitem__, default=OK)


def primaries(client: Any) -> list[Node]:
    """Each server a decision may run on, with a client of it alone."""
    if isinstance(client, RedisCluster):
        return [(node.name, client.get_redis_connection(node)) for node in client.get_primaries()]
    return [("", client)]


def _on(name: str) -> str:
    return f" on {name}" if name else ""


def check_redis(nodes: list[Node], unreachable: str = "") -> tuple[Finding, dict[str, tuple[int, ...]]]:
    """PING and INFO server on every primary: reachable, and which Redis. Also returns each node's version."""
    topology = describe(str(quota_settings.REDIS_URL))
    if unreachable:
        return Finding("redis", ERROR, f"{topology}: {unreachable}"), {}
    versions: dict[str, tuple[int, ...]] = {}
    slowest = 0.0
    for name, client in nodes:
        try:
            started = time.perf_counter()
            client.ping()
            slowest = max(slowest, time.perf_counter() - started)
            text = str(client.info("server").get("redis_version", "0"))
        except STORE_ERRORS as exc:
            return Finding("redis", ERROR, f"{topology}: PING failed{_on(name)}: {exc}"), {}
        versions[name] = tuple(int(p) for p in text.split(".") if p.isdigit())
    shown = ", ".join(sorted({".".join(map(str, v)) for v in versions.values()}))
    ping = f"{slowest * 1000:.1f} ms"
    answered = f"{len(nodes)} primaries answered PING in {ping} at most" if len(nodes) > 1 else f"PING in {ping}"
    detail = f"{topology}: {answered}; Redis {shown}"
    old = sorted(name or "the server" for name, v in versions.items() if v < OLDEST_REDIS)
    if old:
        return Finding("redis", ERROR, f"{detail}; older than 6.2, which the quotas need ({', '.join(old)})"), versions
    return Finding("redis", OK, detail), versions


def check_library(nodes: list[Node], versions: dict[str, tuple[int, ...]], transport: Transport) -> Finding:
    """Whether each primary has this release's Lua: its function library (Redis 7+), else the decide script
    (Redis 6.2, called by EVALSHA). Not there yet is a warning: the first decision there loads it."""
    sha = transport.script("decide").sha
    missing, notes = [], set()
    for name, client in nodes:
        try:
            loaded, how = _has_library(client, sha, versions.get(name, ()) >= (7,))
        except STORE_ERRORS as exc:
            return Finding("library", ERROR, f"could not ask{_on(name)}: {exc}")
        notes.add(how)
        if not loaded:
            missing.append(name or "the server")
    how = "; ".join(sorted(notes))
    if missing:
        where = ", ".join(missing)
        return Finding("library", WARNING, f"{how}: not loaded on {where} yet (the first decision there loads it)")
    return Finding("library", OK, f"{how}: loaded" + (f" on all {len(nodes)} primaries" if len(nodes) > 1 else ""))


def _has_library(client: Any, sha: str, functions: bool) -> tuple[bool, str]:
    """Whether ``client``'s server has this release's Lua, and how it was asked."""
    if functions:
        try:
            listed = client.function_list(library=library_name())
        except ResponseError as exc:  # e.g. NOPERM: this ACL user may not list functions; calls go by EVALSHA
            refused = f"FUNCTION LIST refused ({str(exc).split(' ', 1)[0]}), so decide is called by EVALSHA"
            return bool(client.script_exists(sha)[0]), f"{refused}; script {sha[:12]} (SCRIPT EXISTS)"
        names = {_field(entry, "library_name") for entry in listed}
        return library_name() in names, f"function library {library_name()} (FUNCTION LIST)"
    how = f"Redis 6.2 has no functions, so decide is called by EVALSHA; script {sha[:12]} (SCRIPT EXISTS)"
    return bool(client.script_exists(sha)[0]), how


def _field(entry: Any, name: str) -> str:
    """A field of one FUNCTION LIST entry: a dict (RESP3) or a flat list of names and values (RESP2)."""
    pairs = entry if isinstance(entry, dict) else dict(zip(entry[::2], entry[1::2], strict=True))
    for key, value in pairs.items():
        if (key.decode() if isinstance(key, bytes) else key) == name:
            return value.decode() if isinstance(value, bytes) else str(value)
    return ""


def check_clock(nodes: list[Node]) -> Finding:
    """Redis's TIME against this machine's clock, on every primary; a warning past :data:`MAX_SKEW`.

    Windows, bans and retry times run on Redis's clock; calendar periods' bounds, the day of usage counters and
    API keys' expiry on this machine's: the two must agree.
    """
    skews = {}
    for name, client in nodes:
        try:
            before = clock()
            seconds, micros = client.time()
            after = clock()
        except STORE_ERRORS as exc:
            return Finding("clock", ERROR, f"TIME failed{_on(name)}: {exc}")
        skews[name] = seconds + micros / 1_000_000 - (before + after) / 2
    name, skew = max(skews.items(), key=lambda item: abs(item[1]))
    way = "ahead of" if skew > 0 else "behind"
    if abs(skew) > MAX_SKEW:
        return Finding(
            "clock", WARNING, f"Redis's clock{_on(name)} is {abs(skew):.1f} s {way} this machine's (TIME vs "
            "time.time()): calendar periods and usage days would start at different moments; sync both with NTP"
        )  # fmt: skip
    return Finding("clock", OK, f"Redis's clock is within {abs(skew) * 1000:.0f} ms of this machine's (TIME)")


def check_rules(runtime: Runtime | None) -> Finding:
    """The rules version in Redis, and whether a rules snapshot loads from the backend (the database)."""
    if runtime is None:
        return Finding("rules", ERROR, "not checked: without Redis there is no engine to load them")
    try:
        raw = runtime.redis.get(runtime.rules.version_key)
        version = raw.decode() if raw else "0"
    except STORE_ERRORS:
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
