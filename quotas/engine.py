"""The decision engine: every window of a request decided in one Redis call.

:meth:`Engine.decide` sends one EVALSHA of ``decide.lua`` carrying all the
windows that apply to a request; the script checks them all and consumes
from all of them only if none denies. Clients refused recently are
remembered in-process until their retry time, so a flood past a limit is
refused without touching Redis at all.
"""

from __future__ import annotations

import atexit
import logging
import math
import threading
import time
from collections import OrderedDict, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import redis
from django.utils.module_loading import import_string
from redis.exceptions import RedisError

from .conf import quota_settings
from .exceptions import StoreUnavailable
from .keys import client_key, log_key, rules_version_key, usage_key_base
from .rules import RulesCache, Window
from .scripts import LuaScript, script_source
from .store import connect

logger = logging.getLogger(__name__)

NEVER = -1
_US = 1_000_000
USAGE_TTL_DAYS = 3  # usage hashes outlive their day by this much (USAGE_TTL_DAYS in usage.lua)


@dataclass(slots=True)
class WindowState:
    """The outcome of one window: whether it allowed, and what is left.

    ``retry_us`` is 0 when the window allowed, ``None`` when the request can
    never fit it (its weight exceeds the window's capacity). ``remaining`` is
    ``None`` when the state was not read from Redis (a locally remembered
    denial).
    """

    window: Window
    ok: bool
    remaining: int | None
    reset_us: int
    retry_us: int | None
    delay_us: int = 0
    used: int = 0  # periods and budgets: what the period has used (after this request)
    alert: int = 0  # budgets: thresholds newly reached (1 = 80 %, 2 = 100 %)
    quota: int = 0  # the quota in force: the window's, scaled by an adaptive multiplier

    def __post_init__(self) -> None:
        if not self.quota:
            self.quota = self.window.quota


@dataclass(slots=True)
class Decision:
    """The result of :meth:`Engine.decide` for one request."""

    allowed: bool
    states: list[WindowState]
    now: float  # seconds since the epoch, from the Redis server's clock
    weight: int | None = None
    local: bool = False  # decided from the in-process memory of over-limit clients
    tag: str = ""
    cost_micros: int = 0  # the estimated cost the budgets were charged
    usage: str | None = None  # the usage field prefix the request was counted under
    specs: list[str] = field(default_factory=list)  # the window specs as sent (for reconciliation)
    reconciled: bool = False
    multiplier: float = 1.0  # the adaptive multiplier the rate windows were scaled by
    reduced_only: bool = False  # refused only because of the multiplier (503, not 429)
    banned: bool = False  # refused because the client is banned (escalation), limits unread
    ban_started: bool = False  # this refusal started a ban
    ban_wait_us: int = 0  # until the ban ends
    request_id: str = ""  # holds concurrency leases until released
    extra: dict = field(default_factory=dict)

    @property
    def budget_denied(self) -> bool:
        """Whether a money budget is among the windows that refused the request."""
        return any(s.window.is_budget for s in self.denying_states())

    @property
    def delay(self) -> float:
        """Seconds a shaping leaky bucket asks the request to be held."""
        return max((s.delay_us for s in self.states), default=0) / _US

    def denying_states(self) -> list[WindowState]:
        """Windows that refused the request (shadow windows never refuse)."""
        return [s for s in self.states if not s.ok and not s.window.shadow]

    def would_deny(self) -> list[WindowState]:
        """Shadow windows that would have refused the request."""
        return [s for s in self.states if not s.ok and s.window.shadow]

    def denying_state(self) -> WindowState:
        """The denying window to report: a budget first, else the one with the longest wait."""
        return max(
            self.denying_states(),
            key=lambda s: (s.window.is_budget, math.inf if s.retry_us is None else s.retry_us),
        )

    @property
    def ban_retry_after(self) -> int:
        """Whole seconds until a ban ends."""
        return max(1, math.ceil(self.ban_wait_us / _US))

    @property
    def retry_after(self) -> int | None:
        """Whole seconds until the same request would be admitted (None if allowed).

        The smallest whole number of seconds covering the longest wait among
        the denying windows, never 0. For a request that can never fit, the
        longest denying window's length.
        """
        if self.allowed:
            return None
        if self.banned or self.ban_started:
            return self.ban_retry_after
        waits = [s.window.window * _US if s.retry_us is None else s.retry_us for s in self.denying_states()]
        return max(1, math.ceil(max(waits) / _US))

    def most_restrictive(self) -> WindowState | None:
        """The rate window to show in X-RateLimit-*: the denying one, else the least remaining.

        Budgets count money, not requests, so they are never shown there.
        """
        rate_denials = [s for s in self.denying_states() if not s.window.is_budget]
        if rate_denials:
            return max(rate_denials, key=lambda s: math.inf if s.retry_us is None else s.retry_us)
        enforced = [
            s for s in self.states if not s.window.shadow and not s.window.is_budget and s.remaining is not None
        ]
        if not enforced:
            return None
        return min(enforced, key=lambda s: (s.remaining / max(s.quota, 1), -s.reset_us))


class DenyMemory:
    """Clients refused recently, per window, until their retry time (monotonic).

    Bounded (least recently refused are forgotten first) and cleared when the
    rules change, so a raised limit applies at once.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: OrderedDict[tuple[str, str], tuple[float, int]] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, tag: str, state: WindowState, weight: int) -> None:
        wait_us = state.window.window * _US if state.retry_us is None else state.retry_us
        until = time.monotonic() + wait_us / _US
        with self._lock:
            self._entries[(tag, state.window.state_field)] = (until, weight)
            self._entries.move_to_end((tag, state.window.state_field))
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def check(self, tag: str, windows: Sequence[Window], weight: int | None) -> list[WindowState]:
        """States for the windows this client is known to be refused by, if any."""
        if not self._entries:
            return []
        now = time.monotonic()
        hits = []
        for window in windows:
            if window.shadow:
                continue
            entry = self._entries.get((tag, window.state_field))
            if entry is None:
                continue
            until, min_weight = entry
            if until <= now:
                self._entries.pop((tag, window.state_field), None)
            elif (window.weight if weight is None else weight) >= min_weight:
                wait_us = math.ceil((until - now) * _US)
                hits.append(WindowState(window, False, None, wait_us, wait_us))
        return hits

    def ban(self, tag: str, wait_us: int) -> None:
        """Remember that ``tag`` is banned for ``wait_us`` microseconds."""
        with self._lock:
            self._entries[(tag, "!ban")] = (time.monotonic() + wait_us / _US, 0)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def banned(self, tag: str) -> int:
        """Microseconds left of a remembered ban of ``tag`` (0 if none)."""
        if not self._entries:
            return 0
        entry = self._entries.get((tag, "!ban"))
        if entry is None:
            return 0
        left = entry[0] - time.monotonic()
        if left <= 0:
            self._entries.pop((tag, "!ban"), None)
            return 0
        return math.ceil(left * _US)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


class UsageBuffer:
    """Usage of requests refused in-process (no decision script ran), added to Redis in batches.

    Flushed by the rules poller thread every ``RULES_CHECK_INTERVAL`` and at
    process exit, so a flood answered from memory is still counted: at most
    one interval's worth is lost if the process is killed outright.
    """

    def __init__(self) -> None:
        self._counts: defaultdict[tuple[str, str], int] = defaultdict(int)
        self._lock = threading.Lock()

    def add(self, key_base: str, field: str, amount: int = 1) -> None:
        with self._lock:
            self._counts[key_base, field] += amount

    def drain(self) -> dict[tuple[str, str], int]:
        with self._lock:
            counts, self._counts = self._counts, defaultdict(int)
        return counts


class Engine:
    """Decides requests against Redis. One per process: see :func:`get_engine`."""

    def __init__(self, client: redis.Redis, prefix: str, rules: RulesCache, deny_memory_size: int) -> None:
        self.redis = client
        self.prefix = prefix
        self.rules = rules
        self.deny_memory = DenyMemory(deny_memory_size)
        rules.on_reload = self.deny_memory.clear
        rules.on_tick = self.flush_usage
        self.usage_buffer = UsageBuffer()
        atexit.register(self.flush_usage)
        self._decide = LuaScript(client, script_source("decide"))
        self._refund = LuaScript(client, script_source("refund"))
        self._adjust = LuaScript(client, script_source("adjust"))
        self._release = LuaScript(client, script_source("release"))

    def decide(
        self,
        tag: str,
        windows: Sequence[Window],
        weight: int | None = None,
        now: float | None = None,
        cost_micros: int = 0,
        usage: str | None = None,
        peek: bool = False,
        multiplier: float = 1.0,
        ban_policy: str = "",
        request_id: str = "",
    ) -> Decision:
        """Check and consume ``weight`` in every window for client ``tag``, atomically.

        ``weight`` overrides each rate window's own weight; budgets spend
        ``cost_micros``. ``usage`` ("<plan>|<scope>") counts the decision in
        the client's usage of the day; ``peek`` consumes and counts nothing.
        ``multiplier`` (adaptive limits) scales the rolling rate windows;
        ``ban_policy`` (see :func:`quotas.rules.ban_policy_spec`) enables
        escalation; ``request_id`` names the request's concurrency leases.
        ``now`` (seconds since the epoch) replaces the Redis server's clock,
        for tests. Raises :class:`StoreUnavailable` when Redis fails.
        """
        if now is None and not peek:
            banned_for = self.deny_memory.banned(tag)
            if banned_for:
                self._count_locally(tag, usage, "dx")
                return Decision(
                    False, [], time.time(), weight, local=True, tag=tag, banned=True, ban_wait_us=banned_for
                )
            # With escalation on, refusals must reach Redis to be counted toward a ban
            # (which is then remembered here); a flood costs at most the ban threshold.
            remembered = [] if ban_policy else self.deny_memory.check(tag, windows, weight)
            if remembered:
                self._count_locally(tag, usage, "dr")
                return Decision(False, remembered, time.time(), weight, local=True, tag=tag)
        at = time.time() if now is None else now
        specs = [w.spec_at(at) for w in windows]
        args = [
            "" if now is None else int(now * _US),
            "" if weight is None else weight,
            cost_micros,
            usage or "",
            "peek" if peek else "",
            "" if multiplier == 1.0 else repr(multiplier),
            ban_policy,
            request_id,
            *specs,
        ]
        try:
            reply = self._decide(keys=self.keys_for(tag, windows), args=args)
        except RedisError as exc:
            raise StoreUnavailable(f"decision for {tag} failed: {exc}") from exc
        states = []
        for i, w in enumerate(windows if reply[2] != 2 else ()):  # a banned client's limits are not read
            ok, remaining, reset, retry, delay, used, alert = reply[4 + 7 * i : 11 + 7 * i]
            quota = scaled(w, multiplier)
            states.append(
                WindowState(w, ok == 1, remaining, reset, None if retry == NEVER else retry, delay, used, alert, quota)
            )
        decision = Decision(
            reply[0] == 1,
            states,
            reply[1] / _US,
            weight,
            tag=tag,
            cost_micros=cost_micros,
            usage=usage,
            specs=specs,
            multiplier=multiplier,
            reduced_only=reply[2] == 1,
            banned=reply[2] == 2,
            ban_started=reply[2] == 4,
            ban_wait_us=reply[3],
            request_id=request_id,
        )
        if decision.banned or decision.ban_started:
            if now is None and not peek:
                self.deny_memory.ban(tag, reply[3])
        elif not decision.allowed and now is None and not peek and not decision.reduced_only and not ban_policy:
            for state in decision.denying_states():
                if not state.window.period:  # a period's refusal may end with a reconciliation
                    self.deny_memory.remember(tag, state, state.window.weight if weight is None else weight)
        return decision

    def count_acl(self, tag: str, usage: str | None, allowed: bool, weight: int | None, cost_micros: int) -> None:
        """Count a request an allow or deny list decided (no limits involved)."""
        if not usage:
            return
        mode = "acl-allow" if allowed else "acl-deny"
        args = ["", "" if weight is None else weight, cost_micros, usage, mode, "", "", ""]
        try:
            self._decide(keys=self.keys_for(tag, ()), args=args)
        except RedisError:
            logger.warning("quotas: counting an ACL decision for %s failed", tag, exc_info=True)

    def release(self, decision: Decision) -> None:
        """End the concurrency leases an admitted decision holds."""
        if not decision.request_id or not decision.allowed:
            return
        client = client_key(self.prefix, decision.tag)
        keys = [log_key(client, s.window.state_field) for s in decision.states if s.window.algorithm == "concurrency"]
        if not keys:
            return
        try:
            self._release(keys=keys, args=[decision.request_id])
        except RedisError:
            # The lease runs out on its own; the client is only limited a little longer.
            logger.warning("quotas: releasing the leases of %s failed", decision.tag, exc_info=True)

    def lift_ban(self, tag: str) -> bool:
        """End ``tag``'s ban now (and its refusal count); every process forgets it within a second."""
        try:
            removed = self.redis.hdel(client_key(self.prefix, tag), "!bn", "!dn")
        except RedisError as exc:
            raise StoreUnavailable(f"lifting the ban of {tag} failed: {exc}") from exc
        self.rules.invalidate()  # other processes drop their remembered refusals and bans
        return bool(removed)

    def _count_locally(self, tag: str, usage: str | None, counter: str) -> None:
        if usage:
            self.usage_buffer.add(usage_key_base(client_key(self.prefix, tag)), f"{usage}|{counter}")

    def flush_usage(self) -> None:
        """Add the usage of requests refused in-process to the day's Redis counters."""
        counts = self.usage_buffer.drain()
        if not counts:
            return
        now = time.time()
        day = time.strftime("%Y%m%d", time.gmtime(now))
        expire_at = (int(now // 86400) + 1 + USAGE_TTL_DAYS) * 86400  # as usage.lua does
        try:
            pipe = self.redis.pipeline(transaction=False)
            for (base, field), amount in counts.items():
                pipe.hincrby(f"{base}:{day}", field, amount)
                pipe.expireat(f"{base}:{day}", expire_at)
            pipe.execute()
        except RedisError:
            logger.warning("quotas: could not flush %d local usage counters; keeping them", len(counts))
            for (base, field), amount in counts.items():
                self.usage_buffer.add(base, field, amount)

    def peek(self, tag: str, windows: Sequence[Window]) -> Decision:
        """The client's standing in ``windows`` without consuming or counting anything."""
        return self.decide(tag, windows, weight=0, peek=True)

    def reconcile(self, decision: Decision, actual_micros: int) -> list[WindowState]:
        """Replace an admitted decision's estimated cost with the actual one, once.

        Returns the budget states whose alert thresholds were newly reached.
        """
        if decision.reconciled or not decision.allowed or decision.local:
            return []
        decision.reconciled = True
        delta = actual_micros - decision.cost_micros
        budgets = [(s, spec) for s, spec in zip(decision.states, decision.specs, strict=True) if s.window.is_budget]
        if delta == 0 or (not budgets and not decision.usage):
            return []
        args = [int(decision.now * _US), delta, decision.usage or "", *(spec for _, spec in budgets)]
        try:
            reply = self._adjust(keys=self.keys_for(decision.tag, ()), args=args)
        except RedisError:
            logger.warning("quotas: reconciling the cost of %s failed", decision.tag, exc_info=True)
            return []
        decision.cost_micros = actual_micros
        alerted = []
        for i, (state, _) in enumerate(budgets):
            state.used, state.alert = reply[2 * i], reply[2 * i + 1]
            if state.alert:
                alerted.append(state)
        return alerted

    def keys_for(self, tag: str, windows: Sequence[Window]) -> list[str]:
        """KEYS for the scripts: the client's hash, then each sliding log's set."""
        client = client_key(self.prefix, tag)
        return [client, usage_key_base(client)] + [log_key(client, w.state_field) for w in windows if w.has_own_key]

    def refund(self, decision: Decision, only_refundable: bool = True) -> None:
        """Give back what an admitted ``decision`` consumed (best effort)."""
        states = [s for s in decision.states if s.ok and (s.window.refund_on_error or not only_refundable)]
        if not decision.allowed or decision.local or not states:
            return
        args = [int(decision.now * _US), "" if decision.weight is None else decision.weight]
        args += [s.window.spec_at(decision.now) for s in states]
        try:
            self._refund(keys=self.keys_for(decision.tag, [s.window for s in states]), args=args)
        except RedisError:
            logger.warning("quotas: refund for %s failed", decision.tag, exc_info=True)

    def close(self) -> None:
        """Stop background work, count what is buffered, and drop connections."""
        self.rules.stop()
        self.flush_usage()
        atexit.unregister(self.flush_usage)
        self.redis.close()


def scaled(window: Window, multiplier: float) -> int:
    """The quota of ``window`` under an adaptive multiplier (as decide.lua computes it)."""
    if multiplier == 1.0 or window.code > 5:  # periods and budgets are never scaled
        return window.quota
    return max(1, math.floor(window.quota * multiplier))


_engine: Engine | None = None
_engine_lock = threading.Lock()


def build_engine() -> Engine:
    """An engine configured from ``settings.QUOTAS``."""
    timeout = float(quota_settings.SOCKET_TIMEOUT)
    client = connect(quota_settings.REDIS_URL, timeout)
    backend_path = quota_settings.RULES_BACKEND
    backend = import_string(backend_path)() if backend_path else None
    prefix = quota_settings.KEY_PREFIX
    rules = RulesCache(
        backend,
        client,
        rules_version_key(prefix),
        float(quota_settings.RULES_CHECK_INTERVAL),
        int(quota_settings.CLIENT_CACHE_SIZE),
    )
    return Engine(client, prefix, rules, int(quota_settings.LOCAL_DENY_CACHE_SIZE))


def get_engine() -> Engine:
    """This process's engine, built on first use."""
    global _engine
    engine = _engine
    if engine is None:
        with _engine_lock:
            if _engine is None:
                _engine = build_engine()
            engine = _engine
    return engine


def reset_engine() -> None:
    """Forget the engine (after a settings change); the next use builds a new one."""
    global _engine
    with _engine_lock:
        if _engine is not None:
            _engine.close()
        _engine = None
