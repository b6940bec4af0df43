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
import time
from collections.abc import Sequence
from dataclasses import dataclass

import redis

from quotas.conf import quota_settings
from quotas.engine.breaker import CircuitBreaker
from quotas.engine.decision import _US, DecideCall, Decision, WindowState, scaled
from quotas.engine.deny_memory import DenyMemory
from quotas.engine.fallback import LocalLimiter
from quotas.engine.key_use import KeyUse
from quotas.engine.keys import ClientKeys, client_keys
from quotas.engine.protocol import (
    NEVER,
    AdjustedBudget,
    DecideFlag,
    DecideReply,
    WindowReply,
    adjust_args,
    decide_args,
    refund_args,
    release_args,
)
from quotas.engine.redis_connect import STORE_ERRORS, is_script_error
from quotas.engine.scripts import LuaScript
from quotas.engine.usage_buffer import UsageBuffer, replay_spool
from quotas.exceptions import ScriptFailed, StoreUnavailable
from quotas.observability import metrics
from quotas.observability.history import History
from quotas.observability.refusals import RefusalLog
from quotas.rules.cache import RulesCache
from quotas.rules.snapshot import Window

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PendingDecision:
    """A decide call prepared by :meth:`Engine.prepare_decide`: the script's KEYS and ARGV, and the call."""

    call: DecideCall
    specs: list[bytes]
    keys: list[str]
    args: list[object]


class Engine:
    """Decides requests against Redis. One per process: see :func:`get_engine`."""

    def __init__(
        self, client: redis.Redis, prefix: str, rules: RulesCache, deny_memory_size: int, buckets: int = 1024
    ) -> None:
        self.redis = client
        self.prefix = prefix
        self.buckets = buckets
        self.rules = rules
        self.deny_memory = DenyMemory(deny_memory_size)
        rules.on_reload = self.deny_memory.clear
        rules.on_tick = self.tick
        self.usage_buffer = UsageBuffer()
        self.key_use = KeyUse()
        self.history = History()
        self.refusals = RefusalLog()  # each client's last refusals, for operators
        self.breaker = CircuitBreaker(float(quota_settings.PROBE_INTERVAL))
        self.fallback = LocalLimiter(float(quota_settings.LOCAL_SHARE), deny_memory_size)
        atexit.register(self.flush_usage, spool_on_failure=True)
        self._decide = LuaScript.entry(client, "decide")
        self._refund = LuaScript.entry(client, "refund")
        self._adjust = LuaScript.entry(client, "adjust")
        self._release = LuaScript.entry(client, "release")

    # The engine's entry point: each option of the script by keyword, with its default (DecideCall documents
    # them). Bundled into a DecideCall for the steps below; callers that have one use decide_call().
    def decide(  # noqa: PLR0913
        self,
        tag: str,
        windows: Sequence[Window],
        weight: int | None = None,
        *,
        now: float | None = None,
        cost_micros: int = 0,
        usage: str | None = None,
        peek: bool = False,
        multiplier: float = 1.0,
        ban_policy: str = "",
        request_id: str = "",
    ) -> Decision:
        """Check and consume ``weight`` in every window for client ``tag``, atomically.

        The options are :class:`DecideCall`'s. Raises :class:`StoreUnavailable` when Redis fails.
        """
        return self.decide_call(
            DecideCall(tag, windows, weight, now, cost_micros, usage, peek, multiplier, ban_policy, request_id)
        )

    def decide_call(self, call: DecideCall) -> Decision:
        """:meth:`decide` for a call already made; raises :class:`StoreUnavailable` when Redis fails."""
        pending = self.prepare_decide(call)
        if isinstance(pending, Decision):
            return pending  # answered from this process's memory of refused clients
        try:
            raw = self._decide(keys=pending.keys, args=pending.args)
        except STORE_ERRORS as exc:
            raise self.decide_failed(call.tag, exc) from exc
        return self.finish_decide(pending, raw)

    # decide_call() in three steps, so that quotas.engine.aio sends the same script call from asyncio.

    def prepare_decide(self, call: DecideCall) -> Decision | PendingDecision:
        """The refusal this process remembers for ``call.tag``, else the script call to send.

        Raises :class:`StoreUnavailable` while the circuit breaker is open.
        """
        tag, windows, weight, now, usage = call.tag, call.windows, call.weight, call.now, call.usage
        if now is None and not call.peek:
            banned_for = self.deny_memory.banned(tag)
            if banned_for:
                self._count_locally(tag, usage, "dx")
                return Decision(
                    False, _banned_states(windows, banned_for, call.multiplier), time.time(), weight,
                    local=True, tag=tag, banned=True, ban_wait_us=banned_for,
                )  # fmt: skip
            # With escalation on, refusals must reach Redis to be counted toward a ban
            # (which is then remembered here); a flood costs at most the ban threshold.
            remembered = [] if call.ban_policy else self.deny_memory.check(tag, windows, weight)
            if remembered:
                self._count_locally(tag, usage, "dr")
                return Decision(False, remembered, time.time(), weight, local=True, tag=tag)
        at = time.time() if now is None else now
        specs = [w.spec_at(at) for w in windows]
        keys = self.keys_of(tag)
        day = _day(at)
        args = decide_args(
            keys.field_prefix,
            now="" if now is None else int(now * _US),
            weight="" if weight is None else weight,
            cost=call.cost_micros,
            usage=usage or "",
            mode="peek" if call.peek else "",
            multiplier="" if call.multiplier == 1.0 else repr(call.multiplier),
            ban_policy=call.ban_policy,
            request_id=call.request_id,
            day=day[0],
            specs=specs,
        )
        if not self.breaker.allow():
            raise StoreUnavailable("circuit breaker open: Redis was unreachable moments ago")
        return PendingDecision(call, specs, self.script_keys(keys, windows, day[1]), args)

    def decide_failed(self, tag: str, exc: Exception) -> StoreUnavailable:
        """The error to raise for a decide call Redis failed (``exc``), counted and logged."""
        if is_script_error(exc):
            # A bug or bad state of this client's keys, not an outage: this request alone gets the
            # failure mode; the breaker (every other client) is left alone.
            metrics.observe_redis_error("script")
            logger.error("quotas: the decision script failed for %s: %s", tag, exc)
            return ScriptFailed(f"decision script failed for {tag}: {exc}")
        self.breaker.failure()
        metrics.observe_redis_error("decide")
        return StoreUnavailable(f"decision for {tag} failed: {exc}")

    def finish_decide(self, pending: PendingDecision, raw: Sequence[int]) -> Decision:
        """The decision from decide.lua's reply ``raw`` to ``pending``; refusals are remembered."""
        call = pending.call
        tag, windows, weight, now, peek = call.tag, call.windows, call.weight, call.now, call.peek
        multiplier, ban_policy = call.multiplier, call.ban_policy
        self.breaker.success()
        reply = DecideReply.decode(raw, len(windows))
        flags = reply.flags
        banned = flags == DecideFlag.BANNED  # a banned client's limits are not read: no window in the reply
        if banned:
            states = _banned_states(windows, reply.ban_wait_us, multiplier)
        else:
            states = [_state(w, r, multiplier) for w, r in zip(windows, reply.windows, strict=True)]
        decision = Decision(
            reply.allowed,
            states,
            reply.now_us / _US,
            weight,
            tag=tag,
            cost_micros=call.cost_micros,
            usage=call.usage,
            specs=pending.specs,
            multiplier=multiplier,
            reduced_only=flags == DecideFlag.REDUCED_ONLY,
            banned=banned,
            ban_started=flags == DecideFlag.BAN_STARTED,
            ban_wait_us=reply.ban_wait_us,
            request_id=call.request_id,
        )
        if states and not peek and not banned and any(w.period for w in windows):
            self.fallback.remember(tag, states, decision.now)  # what an outage may still spend (fallback.py)
        if decision.banned or decision.ban_started:
            if now is None and not peek:
                self.deny_memory.ban(tag, reply.ban_wait_us)
        elif not decision.allowed and now is None and not peek and not decision.reduced_only and not ban_policy:
            for state in decision.denying_states():
                if not state.window.period:  # a period's refusal may end with a reconciliation
                    self.deny_memory.remember(tag, state, state.window.weight if weight is None else weight)
        return decision

    def count_acl(
        self, tag: str, usage: str | None, allowed: bool, weight: int | None, cost_micros: int
    ) -> Decision | None:
        """Count a request an allow or deny list decided (no limits involved).

        Returns the decision of an allowed request, which the middleware
        reconciles with the actual cost like any other; None when nothing
        is counted (no usage field). While Redis is unreachable the count is
        kept in-process, as the local fallback keeps its own.
        """
        if not usage:
            return None
        mode = "acl-allow" if allowed else "acl-deny"
        keys = self.keys_of(tag)
        day = _day(time.time())
        args = decide_args(
            keys.field_prefix,
            weight="" if weight is None else weight,
            cost=cost_micros,
            usage=usage,
            mode=mode,
            day=day[0],
        )
        try:
            raw = self._decide(keys=self.script_keys(keys, (), day[1]), args=args)
        except STORE_ERRORS:
            metrics.observe_redis_error("count_acl")
            logger.warning("quotas: counting an ACL decision for %s in-process: Redis failed", tag, exc_info=True)
            if not allowed:
                self._count_locally(tag, usage, "da")
                return None
            return self.decide_locally(tag, (), weight, cost_micros, usage)
        now_us = DecideReply.decode(raw, 0).now_us
        return Decision(allowed, [], now_us / _US, weight, tag=tag, cost_micros=cost_micros, usage=usage)

    def release(self, decision: Decision) -> None:
        """End the concurrency leases an admitted decision holds."""
        if not decision.request_id or not decision.allowed:
            return
        own = self.keys_of(decision.tag)
        keys = [own.own_key(s.window.state_field) for s in decision.states if s.window.algorithm == "concurrency"]
        if not keys:
            return
        try:
            self._release(keys=keys, args=release_args(decision.request_id))
        except STORE_ERRORS:
            metrics.observe_redis_error("release")
            # The lease runs out on its own; the client is only limited a little longer.
            logger.warning("quotas: releasing the leases of %s failed", decision.tag, exc_info=True)

    def lift_ban(self, tag: str) -> bool:
        """End ``tag``'s ban now (and its refusal count); every process forgets it within a second."""
        try:
            keys = self.keys_of(tag)
            removed = self.redis.hdel(keys.bucket, keys.field("!bn"), keys.field("!dn"))
        except STORE_ERRORS as exc:
            metrics.observe_redis_error("lift_ban")
            raise StoreUnavailable(f"lifting the ban of {tag} failed: {exc}") from exc
        self.rules.invalidate()  # other processes drop their remembered refusals and bans
        return bool(removed)

    @property
    def decide_script(self) -> LuaScript:
        """The library's ``decide`` entry point on this engine's client: whether it calls by FCALL
        (:attr:`LuaScript.functions`), and the call itself, for benchmarks and tests of the script."""
        return self._decide

    @property
    def mode(self) -> str:
        """``normal``, or ``breaker_open`` while Redis is treated as down."""
        return "breaker_open" if self.breaker.is_open else "normal"

    def tick(self) -> None:
        """Background work of the poller thread: probe Redis while down, then write what was held
        (usage, keys' last use, the history), each kept for the next tick if its write fails."""
        if self.breaker.is_open:
            try:
                self.redis.ping()
            except STORE_ERRORS:
                return
            self.breaker.success()
            self.fallback.clear()
        if self.flush_usage():
            replay_spool(self.redis)
        for name, notes in (("key_use", self.key_use), ("history", self.history)):
            try:
                notes.write(self.redis, self.prefix)
            except STORE_ERRORS:
                metrics.observe_redis_error(name)
        self.refusals.write(self.redis, self.prefix)  # counts and logs its own errors, keeps what failed

    def decide_locally(
        self,
        tag: str,
        windows: Sequence[Window],
        weight: int | None,
        cost_micros: int,
        usage: str | None,
        *,
        multiplier: float = 1.0,
    ) -> Decision:
        """Decide in this process (failure mode ``local``), counting usage for later."""
        decision = self.fallback.decide(tag, windows, weight, cost_micros, multiplier)
        if usage:
            keys = self.keys_of(tag)
            base, usage = keys.usage_base, keys.field_prefix + usage
            if decision.allowed:
                units = weight if weight is not None else max((w.weight for w in windows if not w.period), default=1)
                for counter, amount in (("a", 1), ("wx", units - 1), ("c", cost_micros)):
                    if amount:
                        self.usage_buffer.add(base, f"{usage}|{counter}", amount)
            else:
                counter = "db" if decision.budget_denied else "dr"
                self.usage_buffer.add(base, f"{usage}|{counter}")
        return decision

    def _count_locally(self, tag: str, usage: str | None, counter: str) -> None:
        if usage:
            keys = self.keys_of(tag)
            self.usage_buffer.add(keys.usage_base, f"{keys.field_prefix}{usage}|{counter}")

    def flush_usage(self, spool_on_failure: bool = False) -> bool:
        """Add the usage counted in-process to the day's Redis counters; True when all was written.

        On failure the counts are kept for the next try (or, with
        ``spool_on_failure``, as at process exit, written to the spool
        directory for another process to replay).
        """
        if not self.usage_buffer or self.usage_buffer.flush(self.redis):
            return True
        metrics.observe_redis_error("flush_usage")
        if spool_on_failure:
            self.usage_buffer.spool()
        return False

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
        keys = self.keys_of(decision.tag)
        args = adjust_args(
            keys.field_prefix,
            now_us=int(decision.now * _US),
            delta=delta,
            usage=decision.usage or "",
            specs=[spec for _, spec in budgets],
        )
        try:
            raw = self._adjust(keys=self.script_keys(keys, (), _day(decision.now)[1]), args=args)
        except STORE_ERRORS:
            metrics.observe_redis_error("reconcile")
            logger.warning("quotas: reconciling the cost of %s failed", decision.tag, exc_info=True)
            return []
        decision.cost_micros = actual_micros
        alerted = []
        for (state, _), budget in zip(budgets, AdjustedBudget.decode_all(raw), strict=True):
            if budget.period_ended:  # nothing was changed
                continue
            state.used, state.alert = budget.used, budget.alert
            if state.alert:
                alerted.append(state)
        return alerted

    def keys_of(self, tag: str) -> ClientKeys:
        """Where client ``tag``'s state lives (see :mod:`quotas.engine.keys`)."""
        return client_keys(self.prefix, tag, self.buckets)

    @staticmethod
    def script_keys(keys: ClientKeys, windows: Sequence[Window], day: str = "") -> list[str]:
        """The KEYS of a script call for a client's ``windows``: its bucket, its usage key of ``day``
        (YYYYMMDD; the bare prefix without one), then the set of each window with a key of its own."""
        usage = f"{keys.usage_base}:{day}" if day else keys.usage_base
        return [keys.bucket, usage, *(keys.own_base + w.state_field for w in windows if w.has_own_key)]

    def refund(self, decision: Decision, only_refundable: bool = True) -> None:
        """Give back what an admitted ``decision`` consumed (best effort)."""
        states = [s for s in decision.states if s.ok and (s.window.refund_on_error or not only_refundable)]
        if not decision.allowed or decision.local or not states:
            return
        keys = self.keys_of(decision.tag)
        args = refund_args(
            keys.field_prefix,
            now_us=int(decision.now * _US),
            weight=decision.weight,
            specs=[s.window.spec_at(decision.now) for s in states],
        )
        try:
            self._refund(keys=self.script_keys(keys, [s.window for s in states]), args=args)
        except STORE_ERRORS:
            metrics.observe_redis_error("refund")
            logger.warning("quotas: refund for %s failed", decision.tag, exc_info=True)

    def withdraw(self, decision: Decision) -> None:
        """Take back an admitted ``decision`` this process then refused (no room to shape it).

        Its units go back to every window, its estimated cost is released, and
        its usage moves from admitted to refused for capacity ("dc").
        """
        if not decision.allowed or decision.local:
            return
        self.refund(decision, only_refundable=False)
        if decision.cost_micros:
            self.reconcile(decision, 0)
        if decision.usage:
            keys = self.keys_of(decision.tag)
            field = f"{keys.field_prefix}{decision.usage}"
            rate_windows = [s.window.weight for s in decision.states if not s.window.period]
            units = decision.weight if decision.weight is not None else max(rate_windows, default=1)
            for counter, amount in (("a", -1), ("wx", 1 - units), ("dc", 1)):
                if amount:
                    self.usage_buffer.add(keys.usage_base, f"{field}|{counter}", amount, _day(decision.now)[1])

    def close(self) -> None:
        """Stop background work, count what is buffered, and drop connections."""
        self.rules.stop()
        self.flush_usage(spool_on_failure=True)
        atexit.unregister(self.flush_usage)
        self.redis.close()


def _banned_states(windows: Sequence[Window], wait_us: int, multiplier: float) -> list[WindowState]:
    """What a banned client's windows show: nothing left until the ban ends.

    The script does not read a banned client's limits, so there are no real
    states; these give every 429 of a ban its RateLimit headers (r=0, t = the
    ban's end) without counting as refusals of those windows (``ok`` stays True:
    the ban refused the request, not the windows).
    """
    return [WindowState(w, True, 0, wait_us, 0, quota=scaled(w, multiplier)) for w in windows]


def _state(window: Window, reply: WindowReply, multiplier: float) -> WindowState:
    """The state of ``window`` from its part of decide.lua's reply, at the quota the multiplier left."""
    return WindowState(
        window,
        ok=reply.ok,
        remaining=reply.remaining,
        reset_us=reply.reset_us,
        retry_us=None if reply.retry_us == NEVER else reply.retry_us,
        delay_us=reply.delay_us,
        used=reply.used,
        alert=reply.alert,
        quota=scaled(window, multiplier),
    )


def _day(now: float) -> tuple[int, str]:
    """``(days since 1970, "YYYYMMDD")`` of ``now`` (UTC): which usage key the scripts write.

    The scripts check it against the Redis server's clock and compute the
    date themselves only when the two disagree (around midnight).
    """
    days = int(now // 86400)
    return days, time.strftime("%Y%m%d", time.gmtime(days * 86400))
