"""The history's keys in Redis: written from a process's notes, read for operators and subscribers.

:class:`~quotas.observability.history.History` notes decisions in a process; :meth:`HistoryStore.write` adds
those notes to Redis in one pipeline (no transaction: fine on a cluster client):

- ``<prefix>:hist:m:<YYYYMMDDHHMM>``: a hash per UTC minute, fields
  ``<plan or ->|<scope or ->|<counter>`` (HINCRBY), kept :data:`MINUTE_KEEP`
  seconds after its minute ends;
- ``<prefix>:hist:h:<YYYYMMDDHH>``: the same fields per UTC hour, kept
  :data:`HOUR_KEEP` seconds after its hour ends;
- ``<prefix>:hist:top:<YYYYMMDDHH>:<a or d>``: a sorted set per hour of the
  clients' admitted (``a``) or denied (``d``) requests, added and trimmed to
  the :data:`TOP_KEEP` largest after every write by one call of ``lua/history_top.lua`` per set,
  with the hourly TTL. The trim
  makes "top" approximate near the boundary: a client dropped at rank 101 starts
  again from its next second's count if it climbs back.

- ``<prefix>:hist:c:{<client>}:<YYYYMMDDHH>``: subscribers only (client tags
  ``s.<subscription id>``), a hash per client and UTC hour, fields ``<MM>|a``
  and ``<MM>|d`` (admitted and refused in minute ``MM``), kept
  :data:`CLIENT_KEEP` (25 h) after its hour ends, for the client's own usage
  page (1 h per minute, 24 h per hour). At most 120 fields per active
  subscriber-hour, so at most 26 hashes per subscriber; measured with
  ``MEMORY USAGE`` (Redis 7.0) at 1,368 bytes per hour hash fully written
  (listpack encoding), so about 34 KB for a subscriber active every minute
  of 25 h (see docs/usage-api.md and ``test_client_history``). Only subscribers: their number is bounded by the
  subscriptions sold, while addresses and users are unbounded (one scan of the
  IPv6 space would write a hash per address).

Every call raises :class:`~quotas.exceptions.StoreUnavailable` when Redis fails.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from quotas.contract.library import script_source
from quotas.contract.protocol import USAGE_COUNTERS, history_top_args
from quotas.contract.protocol import UsageCounter as Counter
from quotas.store.failures import unavailable

#: The usage counters a decision adds to, and the one only the history keeps: refused by this process alone
#: (the local failure mode), which the usage counters count as a rate refusal.
_DECISION_COUNTERS = (
    Counter.ALLOWED, Counter.SHADOW_WOULD_DENY, Counter.DENIED_RATE, Counter.DENIED_BUDGET, Counter.DENIED_CAPACITY,
    Counter.DENIED_BANNED, Counter.DENIED_ACL,
)  # fmt: skip
DENIED_LOCAL = "dl"
#: Counter names as written to Redis (the usage counters' short names, one owner) and in the API.
HISTORY_COUNTERS: dict[str, str] = {
    **{c: USAGE_COUNTERS[c] for c in _DECISION_COUNTERS},
    DENIED_LOCAL: "denied_local",
}
DENIED_COUNTERS = (
    Counter.DENIED_RATE, Counter.DENIED_BUDGET, Counter.DENIED_CAPACITY, Counter.DENIED_BANNED, DENIED_LOCAL,
    Counter.DENIED_ACL,
)  # fmt: skip
#: Seconds a minute's hash lives after its minute ends: 2 hours, plus a margin for clock skew and slow readers.
MINUTE_KEEP = 2 * 3600 + 300
#: Seconds an hour's hash and top-client sets live after their hour ends: 7 days, plus a margin.
HOUR_KEEP = 7 * 86400 + 3600
#: Clients kept in each hour's top set.
TOP_KEEP = 100
#: Seconds a client's hour hash lives after its hour ends: its 24-hour chart, plus an hour's margin.
CLIENT_KEEP = 25 * 3600
#: Member, count pairs per script call (so one call's arguments stay a few hundred KB at most).
_TOP_BATCH = 2 * 10_000
#: The top sets: admitted and denied requests.
TOP_SIDES = {"allowed": "a", "denied": "d"}

Resolution = Literal["minute", "hour"]
_SECONDS = {"minute": 60, "hour": 3600}


#: Per minute since the epoch and field: a count (see :meth:`HistoryStore.write`).
Counts = dict[tuple[int, str], int]
#: Per hour since the epoch, side ("a" or "d") and client: a count.
TopCounts = dict[tuple[int, str, str], int]
#: Per minute since the epoch, subscriber and side: a count.
ClientCounts = dict[tuple[int, str, str], int]


class HistoryStore:
    """The history under ``prefix`` in the Redis ``client`` holds: one write of a process's notes, and reads."""

    def __init__(self, client: Any, prefix: str) -> None:
        self._client = client
        self.prefix = prefix

    def write(self, counts: Counts, top: TopCounts, clients: ClientCounts) -> None:
        """Add a process's notes in one pipeline."""
        with unavailable("writing the history"):
            pipe = _pipeline(self._client, self.prefix, counts)
            _client_pipeline(pipe, self.prefix, clients)
            pipe.execute()
            _add_top(self._client, self.prefix, top)

    def buckets(self, resolution: Resolution, start: datetime, end: datetime) -> list[HistoryBucket]:
        """The buckets from ``start`` to ``end`` (see :func:`read_history`)."""
        with unavailable("reading the history"):
            return read_history(self._client, self.prefix, resolution, start, end)

    def top_clients(self, start: datetime, end: datetime, *, by: str, limit: int) -> list[tuple[str, int]]:
        """The clients with the most ``by`` requests (see :func:`read_top_clients`)."""
        with unavailable("reading the top clients"):
            return read_top_clients(self._client, self.prefix, start, end, by=by, limit=limit)

    def client_history(self, tag: str, resolution: Resolution, *, start: datetime, end: datetime) -> list[ClientPoint]:
        """Subscriber ``tag``'s minutes or hours (see :func:`read_client_history`)."""
        with unavailable("reading a client's history"):
            return read_client_history(self._client, self.prefix, tag, resolution, start=start, end=end)


def _pipeline(client: Any, prefix: str, counts: dict[tuple[int, str], int]) -> Any:
    pipe = client.pipeline(transaction=False)
    hours: dict[tuple[int, str], int] = {}
    for (minute, field), n in counts.items():
        pipe.hincrby(bucket_key(prefix, "minute", minute * 60), field, n)
        hours[(minute // 60, field)] = hours.get((minute // 60, field), 0) + n
    for minute in {m for m, _ in counts}:
        pipe.expireat(bucket_key(prefix, "minute", minute * 60), (minute + 1) * 60 + MINUTE_KEEP)
    for (hour, field), n in hours.items():
        pipe.hincrby(bucket_key(prefix, "hour", hour * 3600), field, n)
    for hour in {h for h, _ in hours}:
        pipe.expireat(bucket_key(prefix, "hour", hour * 3600), (hour + 1) * 3600 + HOUR_KEEP)
    return pipe


def _add_top(client: Any, prefix: str, top: dict[tuple[int, str, str], int]) -> None:
    """Add the clients' counts to each hour's top sets: one script call per set (``lua/history_top.lua``)."""
    if not top:
        return
    pairs: dict[tuple[int, str], list[object]] = {}
    for (hour, side, member), n in top.items():
        pairs.setdefault((hour, side), []).extend((member, n))
    script = client.register_script(script_source("history_top"))  # EVALSHA on any server, as usage_add
    for (hour, side), members in sorted(pairs.items()):
        expires = (hour + 1) * 3600 + HOUR_KEEP
        for start in range(0, len(members), _TOP_BATCH):
            # Trimmed after each batch, as the set was after each write: a member below the cut then comes back
            # from its next count only, the approximation the module docstring describes.
            batch = members[start : start + _TOP_BATCH]
            script(keys=[top_key(prefix, hour * 3600, side)], args=history_top_args(TOP_KEEP, expires, batch))


def _client_pipeline(pipe: Any, prefix: str, clients: dict[tuple[int, str, str], int]) -> None:
    """Add the subscribers' per-minute counts to ``pipe``: one hash per client and hour."""
    for (minute, member, side), n in clients.items():
        pipe.hincrby(client_key(prefix, member, minute * 60), f"{minute % 60:02d}|{side}", n)
    for hour, member in {(m // 60, c) for m, c, _ in clients}:
        pipe.expireat(client_key(prefix, member, hour * 3600), (hour + 1) * 3600 + CLIENT_KEEP)


def bucket_key(prefix: str, resolution: Resolution, at: float) -> str:
    """The hash of the minute or hour holding ``at`` (epoch seconds, UTC)."""
    if resolution == "minute":
        return f"{prefix}:hist:m:{time.strftime('%Y%m%d%H%M', time.gmtime(at))}"
    return f"{prefix}:hist:h:{time.strftime('%Y%m%d%H', time.gmtime(at))}"


def top_key(prefix: str, at: float, side: str) -> str:
    """The top-client set of the hour holding ``at``; ``side`` is "a" (admitted) or "d" (denied)."""
    return f"{prefix}:hist:top:{time.strftime('%Y%m%d%H', time.gmtime(at))}:{side}"


def client_key(prefix: str, client: str, at: float) -> str:
    """The hash of one subscriber (its tag, with or without braces) for the UTC hour holding ``at``."""
    return f"{prefix}:hist:c:{{{client.strip('{}')}}}:{time.strftime('%Y%m%d%H', time.gmtime(at))}"


@dataclass(frozen=True, slots=True)
class HistoryBucket:
    """One minute or hour of one plan and scope: ``counters`` by their long names (all present)."""

    start: datetime
    plan: str | None
    scope: str | None
    counters: dict[str, int]

    @property
    def denied(self) -> int:
        """Requests refused, for any reason (shadow would-denies were admitted: not counted)."""
        return sum(self.counters[HISTORY_COUNTERS[c]] for c in DENIED_COUNTERS)

    @property
    def total(self) -> int:
        """Requests decided: admitted plus refused."""
        return self.counters[HISTORY_COUNTERS[Counter.ALLOWED]] + self.denied

    @property
    def denial_rate(self) -> float:
        """Refused / decided, 0.0 for a bucket with nothing decided."""
        return self.denied / self.total if self.total else 0.0


def bucket_starts(resolution: Resolution, start: datetime, end: datetime) -> list[int]:
    """Epoch seconds of each minute or hour from the one holding ``start`` to the one holding ``end``."""
    step = _SECONDS[resolution]
    first, last = int(start.timestamp()) // step * step, int(end.timestamp()) // step * step
    return list(range(first, last + 1, step))


def read_history(
    client: Any, prefix: str, resolution: Resolution, start: datetime, end: datetime
) -> list[HistoryBucket]:
    """The buckets from ``start`` to ``end`` (aware datetimes) with any count, by start, plan and scope.

    One pipeline of HGETALLs; raises what the client raises.
    """
    starts = bucket_starts(resolution, start, end)
    pipe = client.pipeline(transaction=False)
    for at in starts:
        pipe.hgetall(bucket_key(prefix, resolution, at))
    buckets = []
    for at, mapping in zip(starts, pipe.execute(), strict=True):
        buckets.extend(_buckets(datetime.fromtimestamp(at, UTC), mapping.items()))
    return buckets


def _buckets(start: datetime, fields: Iterable[tuple[bytes, bytes]]) -> list[HistoryBucket]:
    groups: dict[tuple[str, str], dict[str, int]] = {}
    for raw, value in fields:
        plan, rest = _text(raw).split("|", 1)  # a plan slug has no "|"; a scope might
        scope, counter = rest.rsplit("|", 1)
        if counter in HISTORY_COUNTERS:  # a counter a newer version added is left out, not an error
            counters = groups.setdefault((plan, scope), dict.fromkeys(HISTORY_COUNTERS.values(), 0))
            counters[HISTORY_COUNTERS[counter]] += int(value)
    return [
        HistoryBucket(start, None if plan == "-" else plan, None if scope == "-" else scope, counters)
        for (plan, scope), counters in sorted(groups.items())
    ]


def read_top_clients(
    client: Any, prefix: str, start: datetime, end: datetime, *, by: str, limit: int
) -> list[tuple[str, int]]:
    """The ``limit`` clients with the most ``by`` ("allowed" or "denied") requests in the hours from
    ``start`` to ``end``, as (client tag, count), most first.

    Approximate: each hour keeps its top :data:`TOP_KEEP` only, so a client
    outside one hour's top is summed without that hour.
    """
    side = TOP_SIDES[by]
    hours = bucket_starts("hour", start, end)
    pipe = client.pipeline(transaction=False)
    for at in hours:
        pipe.zrange(top_key(prefix, at, side), 0, TOP_KEEP - 1, desc=True, withscores=True)
    totals: dict[str, int] = {}
    for members in pipe.execute():
        for member, score in members:
            name = _text(member)
            totals[name] = totals.get(name, 0) + int(score)
    return sorted(totals.items(), key=lambda item: (-item[1], item[0]))[:limit]


@dataclass(frozen=True, slots=True)
class ClientPoint:
    """One minute or hour of one subscriber: requests admitted and refused (for any reason)."""

    start: datetime
    allowed: int
    denied: int


def read_client_history(
    client: Any, prefix: str, tag: str, resolution: Resolution, *, start: datetime, end: datetime
) -> list[ClientPoint]:
    """Every minute or hour from the one holding ``start`` to the one holding ``end`` for subscriber ``tag``,
    zeros included, oldest first. One pipeline of HGETALLs (one per hour); raises what the client raises.

    Only subscribers' history is kept (see the module docstring): any other tag reads zeros.
    """
    starts = bucket_starts(resolution, start, end)
    hours = sorted({at // 3600 * 3600 for at in starts})
    pipe = client.pipeline(transaction=False)
    for hour in hours:
        pipe.hgetall(client_key(prefix, tag, hour))
    counts: dict[int, list[int]] = {}  # bucket start -> [allowed, denied]
    for hour, mapping in zip(hours, pipe.execute(), strict=True):
        for raw, value in mapping.items():
            minute, side = _text(raw).split("|", 1)
            if side not in ("a", "d") or not minute.isdigit():
                continue  # a field a newer version added is left out, not an error
            at = hour + int(minute) * 60 if resolution == "minute" else hour
            counts.setdefault(at, [0, 0])[side == "d"] += int(value)
    return [ClientPoint(datetime.fromtimestamp(at, UTC), *counts.get(at, (0, 0))) for at in starts]


def _text(value: bytes | str) -> str:
    # The runtime's client returns bytes; a client made with decode_responses=True, str.
    return value.decode() if isinstance(value, bytes) else value
