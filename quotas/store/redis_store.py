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

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from redis.cluster import RedisCluster

from quotas.clock import SYSTEM_CLOCK, Clock
from quotas.contract.keys import ClientKeys, client_keys
from quotas.contract.library import LibraryCaller
from quotas.contract.protocol import US_PER_SECOND, adjust_args, decide_args, decide_runs, refund_args, release_args
from quotas.contract.reply_layout import AdjustedBudget, DecideReply
from quotas.exceptions import ScriptFailed, StoreUnavailable
from quotas.formats.periods import UsageDay, usage_day_span
from quotas.rules.limits import Window
from quotas.settings import quota_settings
from quotas.store.backends.connect import STORE_ERRORS, is_script_error
from quotas.store.decision import DecideCall, Decision, WindowState
from quotas.store.history_store import HistoryStore
from quotas.store.key_use_set import KeyUseSet
from quotas.store.money.budget_day import usage_day_of
from quotas.store.primaries import Primaries
from quotas.store.published_multipliers import PublishedMultipliers
from quotas.store.redis_usage import UsageCounters
from quotas.store.refusal_lists import RefusalLists
from quotas.store.replies import Ban, decision_of, parse_ban
from quotas.store.resp import Encoded
from quotas.store.rules_version import RulesVersion
from quotas.store.server import Server
from quotas.store.transport import bulk, bulk_pair


class RedisStore:
    """Decides, refunds, adjusts and releases in Redis, one script call each. One per runtime.

    What else the engine keeps in Redis goes through its parts, each over the transport's client: the history,
    the last refusals, keys' last use, the multipliers, the rules version, the usage counters and the operators'
    calls on the whole keyspace and its servers. Nothing above the store holds a client.
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
        self.history = HistoryStore(client, prefix)
        self.refusals = RefusalLists(client, prefix)
        self.key_use = KeyUseSet(client, prefix)
        self.multipliers = PublishedMultipliers(client, prefix)
        self.rules_version = RulesVersion(client, prefix)
        self.usage = UsageCounters(client, prefix)
        self.server = Server(client, prefix, buckets)
        self.primaries = Primaries(client)
        # decide.lua's ARGV runs kept in Redis's protocol, by their items (see encode): per route, with its windows'
        # fields that have keys of their own and the call's count of keys; per moment; and each bucket's keys of the
        # day: finding them costs a tenth of encoding them on every call.
        self._routes: dict[tuple[object, ...], tuple[bytes | None, tuple[str, ...], bytes]] = {}
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

        The ARGV is an :class:`~quotas.store.resp.Encoded` list: with it, in Redis's protocol, the runs of
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
        # ``at`` is in it: two calls less a decision.
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
        # Kept by their items (equal items encode alike), whose specs name each window's algorithm and field.
        kept = self._routes.get(route)
        if kept is None:
            own = tuple(w.state_field for w in windows if w.has_own_key)
            kept = _keep(self._routes, route, (_encoded(route), own, bulk((2 + len(own),))))
        route_resp, own, count = kept
        moment_resp = self._moments.get(moment)
        if moment_resp is None:
            moment_resp = _keep(self._moments, moment, _encoded(moment))
        args: Encoded[object] = Encoded((*client, *moment, *route))
        client_resp = bulk_pair(keys.field_prefix, call.request_id)  # the client run, as decide_runs made it
        args.resp = None if route_resp is None or moment_resp is None else client_resp + moment_resp + route_resp
        usage_key = f"{keys.usage_base}:{day.stamp}"
        script_keys = Encoded((keys.bucket, usage_key))
        resp = self._buckets.get(usage_key)  # the bucket's keys of the day (hash, usage), as every client in it sends
        if resp is None:
            resp = _keep(self._buckets, usage_key, _TWO_KEYS + bulk_pair(keys.bucket, usage_key))
        script_keys.resp = resp
        if own:  # and one key a window, of this client's own (a cold decision, 5 limits: 3,500 instructions less)
            own_keys = [keys.own_base + field for field in own]
            script_keys += own_keys
            script_keys.resp = count + resp[len(_TWO_KEYS) :] + bulk(own_keys)
        return script_keys, args, specs

    def decode(self, call: DecideCall, specs: list[bytes], raw: Sequence[int]) -> Decision:
        """The decision in decide.lua's reply ``raw`` to ``call``, whose windows' specs were ``specs``.

        Raises ValueError for a reply of another length than the head alone (a banned client's) or the head and
        every window's slots."""
        # What readers derive once for these windows and weight (the headers' texts), shared by the decisions
        # with the snapshot's own tuple of them: a list is made for one request.
        windows = call.windows
        memo = None
        if type(windows) is tuple:
            memo_key = (id(windows), call.weight)
            kept = self._memos.get(memo_key)
            memo = (kept if kept is not None else _keep(self._memos, memo_key, (windows, {})))[1]
        return decision_of(call, specs, raw, memo)

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
        return Decision(
            allowed=allowed, states=[], now=now_us / US_PER_SECOND, weight=weight, tag=tag, cost_micros=cost_micros,
            usage=usage,
        )  # fmt: skip

    def refund(
        self, decision: Decision, states: Sequence[WindowState], times: int = 1, log_at_us: int | None = None,
        own: Sequence[int] = (),
    ) -> None:  # fmt: skip
        """Give back what ``decision`` consumed in ``states``' windows (``times`` requests' worth: an allowance's
        unused part, whose sliding-log units were recorded at ``log_at_us``; ``own``: see :func:`refund_args`)."""
        keys = self.keys_of(decision.tag)
        specs = [s.window.spec_at(decision.now) for s in states]
        now_us = int(decision.now * US_PER_SECOND)
        args = refund_args(keys.field_prefix, now_us=now_us, weight=decision.weight, specs=specs, times=times,
                           log_at_us=log_at_us, own=own)  # fmt: skip
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
        settlement: str = "",
        release: int = 0,
    ) -> list[AdjustedBudget]:
        """Add ``delta_micros`` to ``decision``'s cost in the budgets whose specs are ``budgets``, and in its usage
        unless not ``in_usage`` (an allowance's unused part was never counted there). ``own``: per budget, the
        alert thresholds ``decision`` reached and has not reported (adjust.lua takes back those the spend falls
        below). ``settlement`` names this settlement: sent again with the same id (a retry after a lost reply),
        it changes nothing. ``release``: at an allowance's end, the reservation it held in each budget."""
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
            settlement=settlement,
            release=release,
        )
        script_keys = self.script_keys(keys, (), day.stamp)
        if settlement:
            script_keys.append(keys.settlement_key(settlement))
        try:
            raw = self.transport.call("adjust", script_keys, args)
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

    def lift_ban(self, tag: str) -> bool:
        """End ``tag``'s ban (and its refusal count); True when there was one."""
        keys = self.keys_of(tag)
        try:
            return bool(self._client.hdel(keys.bucket, keys.field("!bn"), keys.field("!dn")))
        except STORE_ERRORS as exc:
            raise _failure(f"lifting the ban of {tag}", exc) from exc

    def ban(self, tag: str) -> Ban | None:
        """``tag``'s ban in force now (by the Redis server's clock), or None."""
        keys = self.keys_of(tag)
        try:
            raw = self._client.hget(keys.bucket, keys.field("!bn"))
            ban = parse_ban(raw)
            now = self.decision_time(keys.bucket) if ban is not None else 0.0
        except STORE_ERRORS as exc:
            raise _failure(f"reading the ban of {tag}", exc) from exc
        # Seconds left to the microsecond a ban is stored in: epoch floats 600 s apart can differ by 600.0000002.
        return replace(ban, seconds_left=round(ban.until - now, 6)) if ban is not None and ban.until > now else None

    def clear(self, tag: str, windows: Sequence[Window] | None = None, keep: Sequence[Window] = ()) -> int:
        """Delete client ``tag``'s limit state; returns how many fields and keys went.

        Without ``windows``, everything the decisions keep for it: every field of
        the client in its bucket (each window's counter, its ban and refusal
        count, its expiry; found by HSCAN) and every key of its own (sliding logs,
        concurrency leases; found by a SCAN of the keyspace, on every primary of
        a cluster). With ``windows``, only their state. The state of the windows
        in ``keep`` stays either way (a budget's spending, say). Its usage counters and its
        last refusals (a record of what happened) stay. Raises
        :class:`StoreUnavailable` when Redis fails.
        """
        keys = self.keys_of(tag)
        try:
            if windows is None:
                mine = glob_escape(keys.field_prefix) + "*"
                fields = {_raw(f) for f, _ in self._client.hscan_iter(keys.bucket, match=mine, count=1000)}
                own = {_raw(k) for k in self._client.scan_iter(match=glob_escape(keys.own_base) + "*", count=1000)}
            else:
                fields = {_raw(keys.field(w.state_field)) for w in windows if not w.has_own_key}
                own = {_raw(keys.own_key(w.state_field)) for w in windows if w.has_own_key}
            fields -= {_raw(keys.field(w.state_field)) for w in keep if not w.has_own_key}
            own -= {_raw(keys.own_key(w.state_field)) for w in keep if w.has_own_key}
            deleted = int(self._client.hdel(keys.bucket, *fields)) if fields else 0
            for key in own:  # one key per command: each of a cluster's commands names one slot
                deleted += int(self._client.unlink(key))
        except STORE_ERRORS as exc:
            raise _failure(f"resetting the counters of {tag}", exc) from exc
        return deleted

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


def glob_escape(text: str) -> str:
    """``text`` as a literal in a Redis MATCH pattern (SCAN, HSCAN)."""
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)


#: Routes (or moments) a store keeps encoded at most: past it the table starts afresh rather than grow.
_KEPT = 1024
_TWO_KEYS = bulk((2,))  # a call's count of keys, 2, as the command writes it


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


def _raw(name: bytes | str) -> bytes:
    """A field or key name as Redis holds it (the layout writes str; a client answers bytes)."""
    return name if isinstance(name, bytes) else name.encode()
