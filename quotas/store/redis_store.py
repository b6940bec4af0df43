"""The Redis store: each operation encoded for the Lua library, sent through the transport, its reply decoded.

The algorithms live in Lua (``quotas/contract/lua``) and the call layout in
:mod:`quotas.contract.protocol`; this module only turns a
:class:`~quotas.store.decision.DecideCall` into one call's KEYS and ARGV, and
the reply into a :class:`~quotas.store.decision.Decision`. It remembers
nothing and retries nothing: a failure raises
:class:`~quotas.exceptions.StoreUnavailable` (or :class:`~quotas.exceptions.ScriptFailed`
for an error reply about the call itself), and :class:`~quotas.store.guard.Guard`
decides what it means.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redis.cluster import RedisCluster

from quotas.clock import SYSTEM_CLOCK, Clock
from quotas.contract.keys import ClientKeys, client_keys
from quotas.contract.library import LibraryCaller
from quotas.contract.protocol import US_PER_SECOND, adjust_args, decide_args, decide_runs, refund_args, release_args
from quotas.contract.replies import NEVER, REPLY_HEAD, REPLY_PER_WINDOW, AdjustedBudget, DecideFlag, DecideReply
from quotas.exceptions import ScriptFailed, StoreUnavailable
from quotas.formats.periods import UsageDay, usage_day_span
from quotas.rules.limits import Window
from quotas.settings import quota_settings
from quotas.store.backends.connect import STORE_ERRORS, is_script_error
from quotas.store.budget_day import usage_day_of
from quotas.store.client_state import ClientState, banned_states
from quotas.store.decision import DecideCall, Decision, WindowState, scaled
from quotas.store.history_store import HistoryStore
from quotas.store.key_use_set import KeyUseSet
from quotas.store.primaries import Primaries
from quotas.store.published_multipliers import PublishedMultipliers
from quotas.store.redis_usage import UsageCounters
from quotas.store.refusal_lists import RefusalLists
from quotas.store.rules_version import RulesVersion
from quotas.store.server import Server
from quotas.store.transport import Encoded, bulk


class RedisStore:
    """Decides, refunds, adjusts and releases in Redis, one script call each. One per runtime.

    What else the engine keeps in Redis goes through its parts, each over the transport's client: the history,
    the last refusals, keys' last use, the multipliers, the rules version, the usage counters, a client's ban and
    limit state (for operators) and the operators' calls on the whole keyspace and its servers. Nothing above the
    store holds a client.
    """

    def __init__(
        self, transport: LibraryCaller, client: Any, prefix: str, buckets: int = 1024, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self.transport = transport
        # The client ``transport`` sends on (redis-py's, or the memory store's), given by whoever opened both
        # (quotas.store.opening): the store's parts and operators' calls use it, and nothing outside the store
        # reads it from the store or its transport.
        self._client = client
        # The runtime's clock dates the decisions' periods and usage days; the decision itself runs on Redis's own
        # clock (TIME, read by the script) unless the clock is injected, when the script is sent its now().
        self.clock = clock
        self._now = clock.now  # bound once: time.time itself in production
        self._injected = clock.injected
        self._decide = transport.script("decide")  # called as it is: one call less than transport.call("decide")
        self.prefix = prefix
        self.buckets = buckets
        self.history = HistoryStore(self._client, prefix)
        self.refusals = RefusalLists(self._client, prefix)
        self.key_use = KeyUseSet(self._client, prefix)
        self.multipliers = PublishedMultipliers(self._client, prefix)
        self.rules_version = RulesVersion(self._client, prefix)
        self.usage = UsageCounters(self._client, prefix)
        self.client_state = ClientState(self._client, prefix, buckets, self.decision_time)
        self.server = Server(self._client, prefix, buckets)
        self.primaries = Primaries(self._client)
        # decide.lua's ARGV runs kept in Redis's protocol, by their items (see encode): per route, with the fields
        # of its windows that have keys of their own; per moment; and each bucket's keys of the day. Encoding the
        # runs on every call would cost a cold decision about 22,000 instructions with one window, 31,000 with
        # five; finding them costs about 2,000 (cachegrind).
        self._routes: dict[tuple[object, ...], tuple[bytes | None, tuple[str, ...]]] = {}
        self._moments: dict[tuple[object, ...], bytes | None] = {}
        self._buckets: dict[str, bytes] = {}  # by the usage key, which names the bucket and the day
        # Decision.memo of the store's decisions, by their windows (the tuple a rules snapshot keeps for a route,
        # held here with its memo, so no other object has its id meanwhile) and weight.
        self._memos: dict[tuple[int, int | None], tuple[Sequence[Window], dict[str, Any]]] = {}
        # The usage day of decisions in [start, end) seconds, where budget days begin then (see encode).
        self._day: tuple[float, float, object, UsageDay] = (0.0, 0.0, None, usage_day_span(0.0, "UTC")[0])

    # decide() in three steps (encode, send, decode), so that adecide() sends the same call from asyncio.

    def decide(self, call: DecideCall) -> Decision:
        """Check and consume ``call``'s windows atomically; raises :class:`StoreUnavailable` when Redis fails."""
        keys, args, specs = self.encode(call)
        try:
            raw = self._decide(keys, args)
        except STORE_ERRORS as exc:
            raise _failure(f"decision for {call.tag}", exc) from exc
        return self.decode(call, specs, raw)

    async def adecide(self, call: DecideCall) -> Decision:
        """:meth:`decide` from asyncio: the same call, awaited."""
        keys, args, specs = self.encode(call)
        try:
            raw = await self.transport.acall("decide", keys, args)
        except STORE_ERRORS as exc:
            raise _failure(f"decision for {call.tag}", exc) from exc
        return self.decode(call, specs, raw)

    def encode(self, call: DecideCall) -> tuple[Sequence[str], Sequence[object], list[bytes]]:
        """The script call of ``call``: its KEYS, its ARGV, and each window's spec at the call's time (kept on the
        decision, for reconciliation). The server's clock decides unless ``call.now`` is given or the store's clock
        is injected (then it is the clock's ``now()``).

        The ARGV is an :class:`~quotas.store.transport.Encoded` list: with it, in Redis's protocol, the runs of
        slots that its route and the moment fix, kept encoded here (see :class:`~quotas.contract.protocol.DecideArg`).
        """
        now = call.now
        at = self._now() if now is None else now
        windows = call.windows
        # What Window.spec_at returns, without its call for a window with no period (whose spec never changes).
        specs = [w.spec_at(at) if w.period else w.spec for w in windows]
        keys = client_keys(self.prefix, call.tag, self.buckets)  # as keys_of, without its call
        # The scripts check the day against the Redis server's clock and date it themselves only when the two
        # disagree (around midnight where budget days begin). The day here is the quarter hour's, kept here while
        # ``at`` is in it: two calls less a decision (part of the 8,700 instructions of Allowances.take's comment).
        zone = quota_settings.BUDGET_TIME_ZONE
        start, end, kept_zone, day = self._day
        if not start <= at < end or kept_zone != zone:
            day, start, end = usage_day_span(at, str(zone))
            self._day = (start, end, zone, day)
        client, moment, route = decide_runs(
            keys.field_prefix,
            call.request_id,
            day.days,
            day.offset,
            call.allowance,
            "" if now is None and not self._injected else int(at * US_PER_SECOND),
            "" if call.weight is None else call.weight,
            call.cost_micros,
            call.usage or "",
            "peek" if call.peek else "",
            "" if call.multiplier == 1.0 else repr(call.multiplier),
            call.ban_policy,
            specs,
        )
        # Kept by their items (equal items encode alike), so a route's windows with keys of their own are kept too:
        # its specs name each window's algorithm and field.
        kept = self._routes.get(route)
        if kept is None:
            kept = _keep(self._routes, route, (_encoded(route), tuple(w.state_field for w in windows if w.has_own_key)))
        route_resp, own = kept
        moment_resp = self._moments.get(moment)
        if moment_resp is None:
            moment_resp = _keep(self._moments, moment, _encoded(moment))
        args: Encoded[object] = Encoded((*client, *moment, *route))
        args.resp = None if route_resp is None or moment_resp is None else bulk(client) + moment_resp + route_resp
        usage_key = f"{keys.usage_base}:{day.stamp}"
        script_keys = Encoded((keys.bucket, usage_key))
        if own:  # one key a window, of this client's own
            script_keys += [keys.own_base + field for field in own]
            script_keys.resp = bulk((len(script_keys), *script_keys))
        else:  # the bucket's keys of the day (its hash and its usage), the same for every client in the bucket
            resp = self._buckets.get(usage_key)
            script_keys.resp = resp if resp is not None else _keep(self._buckets, usage_key, bulk((2, *script_keys)))
        return script_keys, args, specs

    def decode(self, call: DecideCall, specs: list[bytes], raw: Sequence[int]) -> Decision:
        """The decision in decide.lua's reply ``raw`` to ``call``, whose windows' specs were ``specs``.

        Raises ValueError for a reply of another length than the head alone (a banned client's) or the head and
        every window's slots."""
        windows, multiplier = call.windows, call.multiplier
        size = len(raw)
        if size != REPLY_HEAD + REPLY_PER_WINDOW * len(windows) and size != REPLY_HEAD:
            raise ValueError(f"decide.lua replied {size} values for {len(windows)} windows")
        # The slots read where they are, in the order of DecideReply's head and WindowReply's fields (which
        # DecideReply.decode builds as objects), and Decision made by position: decoding costs about 13,000
        # instructions with one window instead of 44,000, 32,000 with five instead of 77,000 (cachegrind).
        # Unpacking fails loudly if the layout ever changes.
        allowed, now_us, flags, ban_wait_us, granted = raw[:REPLY_HEAD]
        if flags == _BANNED:  # a banned client's limits are not read: no window in the reply
            states = banned_states(windows, ban_wait_us, multiplier)
        else:
            states = []
            start = REPLY_HEAD
            # Each state made by object.__new__ and its slots set here, rather than by WindowState(...): its class
            # call and __init__'s frame cost about 1,100 instructions a window more (cachegrind, as in
            # Allowance.states_now). Every field is set, in WindowState's order.
            new = object.__new__
            for window in windows:
                ok, remaining, reset_us, retry_us, delay_us, used, alert = raw[start : start + REPLY_PER_WINDOW]
                start += REPLY_PER_WINDOW
                state = new(WindowState)
                state.window = window
                state.ok = ok == 1
                state.remaining = remaining
                state.reset_us = reset_us
                state.retry_us = None if retry_us == NEVER else retry_us
                state.delay_us = delay_us
                state.used = used
                state.alert = alert
                state.quota = window.quota if multiplier == 1.0 else scaled(window, multiplier)
                states.append(state)
        # What readers derive once for these windows and weight (the headers' texts: a cold decision admitted
        # costs about 16,000 instructions less with five windows, 3,000 with one, make bench-count). Only for the
        # snapshot's own tuples: a list is made for one request.
        memo = None
        if type(windows) is tuple:
            memo_key = (id(windows), call.weight)
            kept = self._memos.get(memo_key)
            memo = (kept if kept is not None else _keep(self._memos, memo_key, (windows, {})))[1]
        # Every field by position, in Decision's order (keywords cost its __init__ about 5,000 instructions more).
        return Decision(
            allowed == 1,
            states,
            now_us / US_PER_SECOND,
            call.weight,
            False,  # local
            call.tag,
            call.cost_micros,
            call.usage,
            specs,
            False,  # reconciled
            multiplier,
            flags == _REDUCED_ONLY,
            flags == _BANNED,
            flags == _BAN_STARTED,
            ban_wait_us,
            call.request_id,
            False,  # fallback
            granted,
            False,  # allowance
            memo,
        )

    def count(self, tag: str, usage: str, *, allowed: bool, weight: int | None, cost_micros: int) -> Decision:
        """Count in ``tag``'s usage a request decided without limits (an allow or deny list's entry)."""
        keys = self.keys_of(tag)
        at = self._now()
        day = usage_day_of(at)
        args = decide_args(
            keys.field_prefix,
            now=int(at * US_PER_SECOND) if self._injected else "",
            weight="" if weight is None else weight,
            cost=cost_micros,
            usage=usage,
            mode="acl-allow" if allowed else "acl-deny",
            day=day.days,
            day_offset=day.offset,
        )
        try:
            raw = self.transport.call("decide", self.script_keys(keys, (), day.stamp), args)
        except STORE_ERRORS as exc:
            raise _failure(f"counting a listed request of {tag}", exc) from exc
        now_us = DecideReply.decode(raw, 0).now_us
        return Decision(allowed, [], now_us / US_PER_SECOND, weight, tag=tag, cost_micros=cost_micros, usage=usage)

    def refund(
        self, decision: Decision, states: Sequence[WindowState], times: int = 1, log_at_us: int | None = None
    ) -> None:
        """Give back what ``decision`` consumed in ``states``' windows (``times`` requests' worth: an allowance's
        unused part, whose sliding-log units were recorded at ``log_at_us``)."""
        keys = self.keys_of(decision.tag)
        args = refund_args(
            keys.field_prefix,
            now_us=int(decision.now * US_PER_SECOND),
            weight=decision.weight,
            specs=[s.window.spec_at(decision.now) for s in states],
            times=times,
            log_at_us=log_at_us,
        )
        try:
            self.transport.call("refund", self.script_keys(keys, [s.window for s in states]), args)
        except STORE_ERRORS as exc:
            raise _failure(f"refund for {decision.tag}", exc) from exc

    def adjust(
        self,
        decision: Decision,
        delta_micros: int,
        budgets: Sequence[bytes],
        *,
        in_usage: bool = True,
        own: Sequence[int] = (),
    ) -> list[AdjustedBudget]:
        """Add ``delta_micros`` to ``decision``'s cost in the budgets whose specs are ``budgets``, and in its usage
        unless not ``in_usage`` (an allowance's unused part was never counted there). ``own``: per budget, the
        alert thresholds ``decision`` reached and has not reported (adjust.lua takes back those the spend falls
        below)."""
        keys = self.keys_of(decision.tag)
        day = usage_day_of(decision.now)
        args = adjust_args(
            keys.field_prefix,
            now_us=int(decision.now * US_PER_SECOND),
            day=day.days,
            delta=delta_micros,
            usage=(decision.usage or "") if in_usage else "",
            specs=list(budgets),
            own=own,
        )
        try:
            raw = self.transport.call("adjust", self.script_keys(keys, (), day.stamp), args)
        except STORE_ERRORS as exc:
            raise _failure(f"adjusting the cost of {decision.tag}", exc) from exc
        return AdjustedBudget.decode_all(raw)

    def release(self, decision: Decision) -> None:
        """End the concurrency leases ``decision`` holds."""
        own = self.keys_of(decision.tag)
        keys = [own.own_key(s.window.state_field) for s in decision.states if s.window.algorithm == "concurrency"]
        if not keys:
            return
        try:
            self.transport.call("release", keys, release_args(decision.request_id))
        except STORE_ERRORS as exc:
            raise _failure(f"releasing the leases of {decision.tag}", exc) from exc

    def decision_time(self, key: str = "") -> float:
        """The decisions' clock now: an injected clock's, else the Redis server's (:meth:`server_time`)."""
        return self._now() if self._injected else self.server_time(key)

    def server_time(self, key: str = "") -> float:
        """The Redis server's clock (TIME) in seconds since the epoch: the clock decisions and bans use. On a
        cluster, the clock of the primary serving ``key`` (any primary's without one)."""
        client = self._client
        if isinstance(client, RedisCluster):  # TIME names no key: ask the node itself
            node = client.get_node_from_key(key) if key else client.get_default_node()
            client = client.get_redis_connection(node)
        seconds, micros = client.time()
        return seconds + micros / US_PER_SECOND

    def ping(self) -> bool:
        """Whether Redis answers."""
        try:
            self._client.ping()
        except STORE_ERRORS:
            return False
        return True

    def keys_of(self, tag: str) -> ClientKeys:
        """Where client ``tag``'s state lives (see :mod:`quotas.contract.keys`)."""
        return client_keys(self.prefix, tag, self.buckets)

    @staticmethod
    def script_keys(keys: ClientKeys, windows: Sequence[Window], day: str = "") -> list[str]:
        """The KEYS of a script call for a client's ``windows``: its bucket, its usage key of ``day``
        (YYYYMMDD; the bare prefix without one), then the set of each window with a key of its own."""
        usage = f"{keys.usage_base}:{day}" if day else keys.usage_base
        return [keys.bucket, usage, *(keys.own_base + w.state_field for w in windows if w.has_own_key)]

    def close(self) -> None:
        """Drop the transport's connections."""
        self.transport.close()


# The reply's flags as plain ints: an IntEnum member's lookup costs about 1,000 instructions (cachegrind).
_BANNED, _BAN_STARTED, _REDUCED_ONLY = int(DecideFlag.BANNED), int(DecideFlag.BAN_STARTED), int(DecideFlag.REDUCED_ONLY)


#: Routes (or moments) a store keeps encoded at most: past it the table starts afresh rather than grow.
_KEPT = 1024


def _keep(table: dict[Any, Any], items: Any, value: Any) -> Any:
    """Keep ``value`` for ``items`` in ``table`` (emptied first when full); returns ``value``."""
    if len(table) >= _KEPT:
        table.clear()
    table[items] = value
    return value


def _encoded(items: tuple[object, ...]) -> bytes | None:
    """``items`` in Redis's protocol, or None for an item of a type it cannot take (the transport packs the call
    the usual way then, and redis-py names the type)."""
    try:
        return bulk(items)
    except TypeError:
        return None


def _failure(what: str, exc: Exception) -> StoreUnavailable:
    if is_script_error(exc):
        return ScriptFailed(f"{what} failed: {exc}")
    return StoreUnavailable(f"{what} failed: {exc}")
