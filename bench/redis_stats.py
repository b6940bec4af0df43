"""Sections 3 and 4: what a decision costs Redis, in commands and in memory.

Commands are counted two ways. ``INFO commandstats`` is Redis's own count,
but it also counts every command a Lua script runs inside the server; so
``MONITOR`` is read as well, because it marks those script commands
(``[0 lua]``) apart from the ones clients sent, which are the round trips.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from typing import Any

import redis

from quotas.contract.keys import client_keys, client_tag
from quotas.engine import default_engine
from quotas.formats.rates import parse_rates
from quotas.rules.limits import LimitRule

from .clock import avoid_window_edge
from .rules import FLOOD_LIMIT
from .views import BenchUser, FiveLimitsView, FloodView, make_request

#: Commands the bench itself sends while counting; never part of a decision.
_OWN_COMMANDS = {"config|resetstat", "info", "echo", "monitor"}
FLOOD_USER_PK = 10**9
#: How a decision reaches Redis: FCALL (Redis 7 functions) or EVALSHA (Redis 6.2).
SCRIPT_CALLS = ("fcall", "evalsha")


class CommandCounter:
    """Counts, through MONITOR, commands clients sent and commands scripts ran."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self.sent: Counter[str] = Counter()
        self.in_scripts: Counter[str] = Counter()
        self._marker = f"bench-end-{uuid.uuid4().hex}"
        self._monitor: Any = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> CommandCounter:
        self._monitor = self.client.monitor()
        self._monitor.__enter__()  # returns once Redis confirmed MONITOR: nothing is missed
        self._thread = threading.Thread(target=self._read, name="bench-monitor", daemon=True)
        self._thread.start()
        return self

    def _read(self) -> None:
        while True:
            entry = self._monitor.next_command()
            if self._marker in entry["command"]:
                return
            name = entry["command"].split(" ", 1)[0].lower()
            (self.in_scripts if entry["client_type"] == "lua" else self.sent)[name] += 1

    def __exit__(self, *exc: object) -> None:
        # MONITOR streams in order: once our marker arrives, every earlier command has too.
        self.client.echo(self._marker)
        assert self._thread is not None
        self._thread.join(timeout=60)
        self._monitor.__exit__()


def _commandstats(client: redis.Redis) -> dict[str, dict[str, float]]:
    """Redis's per-command stats since the last reset, without the bench's own commands."""
    stats = {name.removeprefix("cmdstat_"): v for name, v in client.info("commandstats").items()}
    return {name: v for name, v in stats.items() if name not in _OWN_COMMANDS}


def _five_limit_requests(first_pk: int, count: int) -> list[Any]:
    # A fresh user per request: each decision starts from a client Redis has never seen.
    return [make_request("/five/", BenchUser(pk=first_pk + i)) for i in range(count)]


def commands_per_decision(admin: redis.Redis, decisions: int) -> dict[str, Any]:
    """Redis commands for ``decisions`` five-limit QuotaThrottle decisions (all admitted).

    Two passes: commandstats alone (MONITOR slows the server down, which would
    distort the server time per call), then MONITOR for the round trips.
    """
    view = FiveLimitsView.as_view()
    view(make_request("/five/", BenchUser(pk=3 * 10**9)))  # rules snapshot and script loaded beforehand
    requests = _five_limit_requests(2 * 10**9, decisions)
    admin.config_resetstat()
    statuses = Counter(view(request).status_code for request in requests)
    stats = _commandstats(admin)
    requests = _five_limit_requests(2 * 10**9 + decisions, decisions)
    with CommandCounter(admin) as counter:
        statuses.update(view(request).status_code for request in requests)
    calls = sum(stats.get(name, {}).get("calls", 0) for name in SCRIPT_CALLS)
    usec = sum(stats.get(name, {}).get("usec", 0) for name in SCRIPT_CALLS)
    return {
        "decisions": decisions,
        "statuses": dict(statuses),
        "script_calls_per_decision": round(calls / decisions, 4),
        "script_server_us": round(usec / max(calls, 1), 2),
        "commandstats_total_per_decision": round(sum(v["calls"] for v in stats.values()) / decisions, 4),
        "round_trips_per_decision": round(sum(counter.sent.values()) / decisions, 4),
        "sent_by_clients": dict(counter.sent),
        "run_inside_scripts_per_decision": {k: round(v / decisions, 3) for k, v in counter.in_scripts.items()},
    }


def flood(admin: redis.Redis, requests: int) -> dict[str, Any]:
    """One client far over a small limit: how many requests still reach Redis."""
    view = FloodView.as_view()
    user = BenchUser(pk=FLOOD_USER_PK)
    prepared = [make_request("/flood/", user) for _ in range(requests)]
    avoid_window_edge(FLOOD_LIMIT.rates[0].window, needed=5)
    admin.config_resetstat()
    with CommandCounter(admin) as counter:
        statuses = Counter(view(request).status_code for request in prepared)
    stats = _commandstats(admin)
    script_calls = sum(stats.get(name, {}).get("calls", 0) for name in SCRIPT_CALLS)
    admitted, denied = statuses.get(200, 0), statuses.get(429, 0)
    round_trips = sum(counter.sent.values())
    # Every admitted request needs its one round trip; anything beyond is what denials cost.
    return {
        "limit": str(FLOOD_LIMIT.rates[0]),
        "requests": requests,
        "admitted": admitted,
        "denied": denied,
        "other_statuses": {k: v for k, v in statuses.items() if k not in (200, 429)},
        "script_calls": script_calls,
        "round_trips": round_trips,
        "round_trips_per_denied": round(max(0, round_trips - admitted) / max(denied, 1), 4),
    }


def memory_per_client(admin: redis.Redis, algorithm: str, clients: int, rate: str = "100/min") -> dict[str, Any]:
    """used_memory growth per client after one admitted decision each."""
    runtime = default_engine.runtime()
    rule = LimitRule(id="api", name="api", rates=parse_rates(rate), algorithm=algorithm)
    admin.flushall()
    runtime.guard.decide(client_tag("ip", "192.0.2.1"), rule.windows)  # loads the script before "before"
    admin.flushall()
    paused = _set_active_expiry(admin, enabled=False)
    try:
        before = int(admin.info("memory")["used_memory"])
        for i in range(clients):
            tag = client_tag("ip", f"10.{i >> 16}.{(i >> 8) & 255}.{i & 255}")
            if not runtime.guard.decide(tag, rule.windows).allowed:
                raise RuntimeError(f"{algorithm}: first decision for {tag} was refused")
        time.sleep(0.1)  # let serverCron finish any incremental rehash of the keyspace
        after = int(admin.info("memory")["used_memory"])
        keys = int(admin.dbsize())
        # The last client's key: still within its TTL even for a bucket that refills in 0.6 s.
        own_key = rule.windows[0].has_own_key
        keys = client_keys(runtime.prefix, tag, runtime.store.buckets)
        key = keys.own_key(rule.windows[0].state_field) if own_key else keys.bucket
        one_key = int(admin.memory_usage(key, samples=0) or 0)
    finally:
        if paused:
            _set_active_expiry(admin, enabled=True)
        admin.flushall()
    return {
        "algorithm": algorithm,
        "rate": rate,
        "clients": clients,
        "keys": keys,
        "active_expiry_paused": paused,
        "bytes_per_client": round((after - before) / clients, 1),
        "memory_usage_one_key": one_key,
        "key_example": key,
    }


def _set_active_expiry(admin: redis.Redis, enabled: bool) -> bool:
    """Switch Redis's background expiry; False when DEBUG is not allowed."""
    try:
        admin.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", 1 if enabled else 0)
    except redis.ResponseError:
        return False
    return True
