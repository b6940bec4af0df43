"""The format of the decision script's usage counters in Redis, and reading them with a given client.

The decision script (``quotas/contract/lua/usage.lua``) keeps one hash per bucket of
clients and usage day (where budget days begin, ``BUDGET_TIME_ZONE``), ``<KEY_PREFIX>:{b<bucket>}:u:<YYYYMMDD>`` (see
:mod:`quotas.contract.keys`), with fields
``<client>|<plan id or ->|<scope or ->|<counter>`` holding cumulative totals. This
module only reads them: nothing here writes to or deletes from Redis.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any, NamedTuple

from redis.exceptions import ResponseError

from quotas.contract.keys import client_keys
from quotas.contract.protocol import USAGE_COUNTERS, USAGE_TTL_DAYS, UsageCounter
from quotas.settings import quota_settings

logger = logging.getLogger(__name__)

#: Redis counter name -> UsageRecord field (owned by quotas.contract.protocol, shared with the scripts).
COUNTER_FIELDS = USAGE_COUNTERS
#: The hashes of today and of this many previous days can still be read (they expire after that).
RETENTION_DAYS = USAGE_TTL_DAYS
#: Longest client tag and scope a row can hold (usage.models.UsageRecord's field lengths).
MAX_TEXT = 100
#: The field holding a hash's generation (GENERATION_FIELD in usage.lua): set
#: when the hash is created, so a hash created again after Redis lost its data
#: is told apart from the one already flushed. Fields starting with "~" are
#: bookkeeping, not counters (usage_add.lua's "~w:<writer>" batch marks too).
GENERATION_FIELD = b"~g"

_GLOB_SPECIAL = re.compile(r"([*?\[\]\\])")

#: The client of anonymous usage. Every anonymous client (``ip.<address or network>``) is counted in Redis as
#: itself, but stored as this one aggregate: one row per usage hash (bucket and life), plan, scope and day
#: while the hash can still change, folded into one per plan, scope and day afterwards (usage/retention.py).
#: Addresses are unbounded (a /48 holds 65,536 /64s), rows must not be.
ANONYMOUS_CLIENT = "ip.*"
#: The tag kind of anonymous clients (quotas.identity.clients).
ANONYMOUS_KIND = "ip."


class RowKey(NamedTuple):
    """What identifies one usage row: client tag (without braces), plan id (0: none), scope, day.

    ``generation`` tells apart the counters of one day kept by two lives of
    the same Redis hash (see :data:`GENERATION_FIELD`): each is copied to its
    own row, and readers sum them.
    """

    client: str
    plan_key: int
    scope: str
    day: date
    generation: str = ""


Counters = dict[str, int]


@dataclass(slots=True)
class Snapshot:
    """Usage rows read from Redis in one atomic step, at the Redis server time ``observed_at``."""

    observed_at: datetime
    rows: dict[RowKey, Counters]
    keys: int = 0
    skipped: int = 0


def server_now(redis_client: Any) -> datetime:
    """The Redis server's clock (the clock the decision script dates usage with)."""
    seconds, micros = redis_client.time()
    return datetime.fromtimestamp(seconds, UTC) + timedelta(microseconds=micros)


def readable_days(today: date, lookback: int = RETENTION_DAYS) -> list[date]:
    """``today`` and the ``lookback`` days before it, newest first."""
    return [today - timedelta(days=n) for n in range(lookback + 1)]


def usage_key(prefix: str, client: str, day: date) -> str:
    """The usage hash holding ``client`` (a tag without braces, e.g. ``s.12``) on ``day``."""
    keys = client_keys(prefix, "{" + client + "}", int(quota_settings.KEY_BUCKETS))
    return f"{keys.usage_base}:{day:%Y%m%d}"


def parse_usage_key(prefix: str, key: str | bytes) -> date | None:
    """The day of a usage key, or None if ``key`` is not one."""
    text = key.decode("utf-8", "replace") if isinstance(key, bytes) else key
    head = prefix + ":{"
    start = text.find("}:u:", len(head))
    if not text.startswith(head) or start < 0:
        return None
    try:
        return datetime.strptime(text[start + 4 :], "%Y%m%d").date()
    except ValueError:
        return None


def scan_usage_keys(redis_client: Any, prefix: str, days: Iterable[date], count: int = 1000) -> Iterator[str]:
    """Every usage key of ``days`` (one SCAN of the keyspace; a key may repeat, as SCAN allows)."""
    wanted = set(days)
    pattern = _GLOB_SPECIAL.sub(r"\\\1", prefix) + ":{*}:u:*"
    for key in redis_client.scan_iter(match=pattern, count=count):
        parsed = parse_usage_key(prefix, key)
        if parsed is not None and parsed in wanted:
            yield key.decode() if isinstance(key, bytes) else key


# TIME and every HGETALL in one script: an atomic snapshot, valid on a cluster when the keys share a slot.
_SNAPSHOT_SCRIPT = """
local out = {redis.call('TIME')}
for i, key in ipairs(KEYS) do out[i + 1] = redis.pcall('HGETALL', key) end
return out
"""


def group_by_slot(redis_client: Any, keys: Iterable[str]) -> list[list[str]]:
    """``keys`` grouped so that each group can be read in one script (one group off a cluster)."""
    keyslot = getattr(redis_client, "keyslot", None)
    if keyslot is None:
        return [list(keys)]
    groups: dict[int, list[str]] = {}
    for key in keys:
        groups.setdefault(keyslot(key), []).append(key)
    return list(groups.values())


def read_snapshot(redis_client: Any, prefix: str, keys: list[str]) -> Snapshot:
    """The rows of ``keys`` and the server time, read atomically in one script call.

    On a Redis Cluster the keys must share a slot (see :func:`group_by_slot`).
    """
    replies = redis_client.register_script(_SNAPSHOT_SCRIPT)(keys=keys)
    seconds, micros = int(replies[0][0]), int(replies[0][1])
    snapshot = Snapshot(datetime.fromtimestamp(seconds, UTC) + timedelta(microseconds=micros), {}, len(keys))
    for key, reply in zip(keys, replies[1:], strict=True):
        day = parse_usage_key(prefix, key)
        if isinstance(reply, ResponseError) or day is None:
            logger.error("usage: %s is not a usage hash (%s); skipped", key, reply)
            snapshot.skipped += 1
            continue
        mapping = dict(zip(reply[::2], reply[1::2], strict=True))
        snapshot.skipped += add_hash(snapshot.rows, day, mapping, hash_id=_bucket_of(key))
    return snapshot


def snapshots(redis_client: Any, prefix: str, days: Iterable[date], batch_size: int) -> Iterator[Snapshot]:
    """Every usage hash of ``days``, read ``batch_size`` keys per atomic snapshot (keys of one slot each)."""
    for group in group_by_slot(redis_client, scan_usage_keys(redis_client, prefix, days)):
        for start in range(0, len(group), batch_size):
            yield read_snapshot(redis_client, prefix, group[start : start + batch_size])


def read_rows(
    redis_client: Any, prefix: str, days: list[date], client: str | None = None, batch_size: int = 500
) -> dict[RowKey, Counters]:
    """The rows of ``days`` as Redis holds them now: every client's (one scan), or only ``client``'s (one
    pipeline of the hashes it is counted in)."""
    rows: dict[RowKey, Counters] = {}
    if client is None:
        for snapshot in snapshots(redis_client, prefix, days, batch_size):
            rows.update(snapshot.rows)
        return rows
    pipe = redis_client.pipeline(transaction=False)
    for day in days:
        pipe.hgetall(usage_key(prefix, client, day))
    for day, mapping in zip(days, pipe.execute(), strict=True):
        add_hash(rows, day, mapping, client=client)
    return rows


def add_hash(
    rows: dict[RowKey, Counters], day: date, mapping: dict, client: str | None = None, *, hash_id: str = ""
) -> int:
    """Add one usage hash's fields to ``rows`` (only ``client``'s, if given); returns how many were skipped.

    With ``hash_id`` (the hash's bucket, as the flush and the all-clients readers read whole hashes),
    anonymous clients' counters are summed into one row of :data:`ANONYMOUS_CLIENT` per plan and scope,
    whose generation names the hash too: a hash is read whole in one snapshot, so that sum is the hash's
    absolute total, and rows of different hashes never overwrite each other. Adding the same hash again
    gives the same rows (never twice the counts).
    """
    skipped = 0
    hash_rows: dict[RowKey, Counters] = {}
    extra: dict[RowKey, int] = {}  # "wx" of each row in this hash
    raw_generation = mapping.get(GENERATION_FIELD, mapping.get(GENERATION_FIELD.decode(), b""))
    generation = raw_generation.decode() if isinstance(raw_generation, bytes) else str(raw_generation)
    for raw_field, raw_value in mapping.items():
        if (raw_field[:1] if isinstance(raw_field, bytes) else raw_field[:1].encode()) == b"~":
            continue  # bookkeeping, not a counter
        parsed = _parse_field(raw_field)
        if parsed is None or len(parsed[0]) > MAX_TEXT:
            logger.warning("usage: unreadable field %r on %s; skipped", raw_field, day)
            skipped += 1
            continue
        field_client, plan_key, scope, counter = parsed
        if client is not None and field_client != client:
            continue  # another client of the same bucket
        name = COUNTER_FIELDS.get(counter)
        if name is None:
            # A counter the decision script added after this code was written: say so, loudly.
            logger.warning("usage: unknown counter %r of %s on %s; not stored", counter, field_client, day)
            skipped += 1
            continue
        row_generation = generation
        if hash_id and field_client.startswith(ANONYMOUS_KIND):
            field_client, row_generation = ANONYMOUS_CLIENT, f"{generation}@{hash_id}"
        key = RowKey(field_client, plan_key, scope, day, row_generation)
        row = hash_rows.setdefault(key, dict.fromkeys(COUNTER_FIELDS.values(), 0))
        if counter == UsageCounter.EXTRA_WEIGHT:
            extra[key] = extra.get(key, 0) + int(raw_value)
        else:
            row[name] += int(raw_value)
        extra.setdefault(key, 0)
    for key, units in extra.items():
        # The scripts count only the units beyond one a request ("wx"): one HINCRBY less for most requests.
        hash_rows[key]["weight"] = hash_rows[key]["allowed"] + units
    rows.update(hash_rows)
    return skipped


def _bucket_of(key: str | bytes) -> str:
    """``b<n>`` of a usage key ``<prefix>:{b<n>}:u:<day>`` (its hash tag)."""
    text = key.decode("utf-8", "replace") if isinstance(key, bytes) else key
    start = text.rfind("{", 0, text.rfind("}:u:"))
    return text[start + 1 : text.rfind("}:u:")]


def _parse_field(raw: str | bytes) -> tuple[str, int, str, str] | None:
    """``(client, plan key, scope, counter)`` of a usage field, or None."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    client, sep, text = text.partition("|")
    if not client or not sep:
        return None
    plan, _, rest = text.partition("|")
    scope, sep, counter = rest.rpartition("|")
    if not sep or len(scope) > MAX_TEXT:
        return None
    if plan == "-":
        plan_key = 0
    elif plan.isdigit():
        plan_key = int(plan)
    else:
        return None
    return client, plan_key, "" if scope == "-" else scope, counter
