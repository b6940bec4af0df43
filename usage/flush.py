"""Copy the Redis usage counters into :class:`~usage.models.UsageRecord` rows, losing nothing.

The counters in Redis are cumulative totals per client and day, so a flush
copies absolute values; it never adds. Each batch of keys is read in one
MULTI/EXEC together with the Redis time, and written in one transaction by
an upsert that only ever moves a row forward:

* a row is rewritten only by a newer snapshot (``observed_at``) that differs
  from it, so concurrent flushes cannot put an older reading back;
* request counters and weight never decrease (``GREATEST``/``MAX``), so even
  a Redis that lost its data cannot erase what was already flushed;
* a hash Redis created again after losing its data carries a new generation
  id (``quotas.store.usage_hash_format.GENERATION_FIELD``), so its counts go to a row of their
  own and add onto the old one's instead of hiding behind it;
* cost is copied as read, because reconciling an estimated cost with the
  actual one can lower it.

Running a flush twice, concurrently, or again after it was killed at any
point therefore converges on exactly the Redis totals. Redis data is never
deleted here: the hashes expire on their own three days after their day.

The upsert is one statement per database: ``INSERT ... ON CONFLICT DO UPDATE
... WHERE`` on PostgreSQL and SQLite, ``INSERT ... ON DUPLICATE KEY UPDATE``
on MySQL and MariaDB (:data:`SUPPORTED_VENDORS`; the system check
``usage.E001`` reports any other). Django's
``bulk_create(update_conflicts=True)`` cannot express the rules above: it
copies every column as read.
"""

from __future__ import annotations

import ipaddress
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from itertools import islice
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from plans.models import APIKey, Plan, Subscription
from quotas.internal_api import KEEP_SECONDS, RETENTION_DAYS, Counters, RowKey, back_office, readable_days, usage_date

from .models import COUNTERS, UsageRecord

logger = logging.getLogger(__name__)

DEFAULT_BATCH_SIZE = 500
#: Counters that only ever grow in Redis; cost may shrink when reconciled.
MONOTONIC = tuple(c for c in COUNTERS if c != "cost_micros")
_COLUMNS = (
    "client", "subscription_id", "plan_id", "plan_key", "scope", "day", "generation", *COUNTERS, "observed_at",
    "updated_at",
)  # fmt: skip
_CONFLICT = ("client", "plan_key", "scope", "day", "generation")


@dataclass(slots=True)
class FlushReport:
    """What one flush did."""

    days: list[date]
    keys: int = 0  # usage hashes read
    rows: int = 0  # rows offered to the database
    written: int = 0  # rows inserted or moved forward
    skipped: int = 0  # unreadable keys or fields (logged)
    batches: int = 0
    keys_marked_used: int = 0  # API keys whose last use moved forward
    seconds: float = 0.0


def flush_usage(
    now: datetime | None = None,
    *,
    lookback_days: int = RETENTION_DAYS,
    batch_size: int = DEFAULT_BATCH_SIZE,
    batch_delay: float = 0.0,
) -> FlushReport:
    """Write the usage hashes of ``now``'s usage day (``BUDGET_TIME_ZONE``) and the ``lookback_days`` before it
    to the database.

    ``now`` defaults to the Redis server's clock (the one usage is dated with).
    ``batch_size`` keys are read and written per transaction; ``batch_delay``
    seconds are slept inside each transaction (a test hook to widen the
    window in which a killed worker leaves a batch half done). Returns a
    :class:`FlushReport`; raises ``STORE_ERRORS`` or database errors.
    """
    started = time.monotonic()
    reads = back_office()
    now = now or reads.now()
    report = FlushReport(days=readable_days(usage_date(now), lookback_days))
    for snapshot in reads.usage_snapshots(report.days, batch_size):
        report.keys += snapshot.keys
        report.skipped += snapshot.skipped
        report.rows += len(snapshot.rows)
        written = write_rows(snapshot.rows, snapshot.observed_at, batch_delay)
        report.written += written
        report.batches += 1
        logger.info(
            "usage flush: batch %d written (%d keys, %d rows, %d moved forward)",
            report.batches, snapshot.keys, len(snapshot.rows), written,
        )  # fmt: skip
    # The addresses are read after the times: a use noted in between leaves an address newer than its time,
    # which the next flush's time catches up with (a time is never older than the address beside it after that).
    report.keys_marked_used = copy_key_use(reads.keys_last_used(), reads.keys_last_used_from())
    # Copied above: what is older than a day can go, so the next flush reads only the keys used lately.
    reads.forget_key_use_before(now.timestamp() - KEEP_SECONDS)
    reads.mark_flushed(now)  # what quota_usage_flush_lag_seconds counts from
    report.seconds = time.monotonic() - started
    return report


def copy_key_use(last_used: dict[int, float], last_from: dict[int, tuple[float, str]] | None = None) -> int:
    """Move ``APIKey.last_used_at`` forward to the times recorded in Redis, and ``last_used_from`` to the address
    of each key's latest use whose address is known (``last_from``); returns the keys changed."""
    last_from = last_from or {}
    changed = []
    ids = sorted(set(last_used) | set(last_from))
    for start in range(0, len(ids), 500):  # SQLite caps a query's parameters; a busy day may see more keys
        batch = ids[start : start + 500]
        for key in APIKey.objects.filter(pk__in=batch).only("pk", "last_used_at", "last_used_from"):
            moved = False
            if key.pk in last_used:
                at = datetime.fromtimestamp(last_used[key.pk], UTC).replace(microsecond=0)
                if key.last_used_at is None or key.last_used_at < at:
                    key.last_used_at = at
                    moved = True
            address = _address(last_from.get(key.pk))
            if address is not None and address != key.last_used_from:
                key.last_used_from = address
                moved = True
            if moved:
                changed.append(key)
    APIKey.objects.bulk_update(changed, ["last_used_at", "last_used_from"], batch_size=500)
    return len(changed)


def _address(note: tuple[float, str] | None) -> str | None:
    """A note's address as the database keeps it (None: no note, or not an address, e.g. a hook's odd answer)."""
    if note is None:
        return None
    try:
        return str(ipaddress.ip_address(note[1]))
    except ValueError:
        return None


def write_rows(rows: dict[RowKey, Counters], observed_at: datetime, delay: float = 0.0) -> int:
    """Upsert ``rows`` read at ``observed_at`` in one transaction; returns the rows written."""
    if not rows:
        return 0
    subscription_ids = {sub_id for k in rows if (sub_id := _subscription_id(k.client)) is not None}
    subscriptions = set(Subscription.objects.filter(pk__in=subscription_ids).values_list("pk", flat=True))
    plans = set(Plan.objects.filter(pk__in={k.plan_key for k in rows} - {0}).values_list("pk", flat=True))
    stamp = timezone.now()
    values = []
    for key in sorted(rows):  # one lock order for every flush: concurrent flushes cannot deadlock
        sub_id = _subscription_id(key.client)
        counters = rows[key]
        values.append(
            (
                key.client,
                sub_id if sub_id in subscriptions else None,
                key.plan_key if key.plan_key in plans else None,
                key.plan_key,
                key.scope,
                key.day,
                key.generation,
                *(counters[c] for c in COUNTERS),
                observed_at,
                stamp,
            )
        )
    written = 0
    upsert = _upsert_for(connection.vendor)
    per_statement = (connection.features.max_query_params or 65535) // len(_COLUMNS)
    with transaction.atomic():
        with connection.cursor() as cursor:
            for chunk in _chunks(iter(values), per_statement):
                cursor.execute(upsert(len(chunk)), [v for row in chunk for v in _adapt(row)])
                written += max(cursor.rowcount, 0)
            if connection.vendor == "mysql":  # its row counts cannot tell inserted rows from unchanged ones
                written = _count_written(cursor, observed_at, stamp, {k.day for k in rows})
        if delay:
            time.sleep(delay)
    return written


def _upsert_for(vendor: str) -> Callable[[int], str]:
    try:
        return _UPSERTS[vendor]
    except KeyError:
        raise NotImplementedError(
            f"usage flushing supports {', '.join(SUPPORTED_VENDORS)}, not {vendor} (system check usage.E001)"
        ) from None


def _on_conflict_sql(count: int) -> str:
    """INSERT ... ON CONFLICT DO UPDATE ... WHERE for ``count`` rows (PostgreSQL and SQLite share the syntax)."""
    q = connection.ops.quote_name
    greatest = "MAX" if connection.vendor == "sqlite" else "GREATEST"  # SQLite's two-argument MAX is GREATEST
    table = q(UsageRecord._meta.db_table)
    sets = [f"{q(c)} = {greatest}({table}.{q(c)}, excluded.{q(c)})" for c in MONOTONIC]
    sets += [f"{q(c)} = excluded.{q(c)}" for c in ("cost_micros", "observed_at", "updated_at")]
    changed = " OR ".join(f"{table}.{q(c)} <> excluded.{q(c)}" for c in COUNTERS)
    return (
        f"{_insert_sql(count)} "
        f"ON CONFLICT ({', '.join(q(c) for c in _CONFLICT)}) DO UPDATE SET {', '.join(sets)} "
        f"WHERE {table}.{q('observed_at')} < excluded.{q('observed_at')} AND ({changed})"
    )


def _on_duplicate_key_sql(count: int) -> str:
    """INSERT ... ON DUPLICATE KEY UPDATE for ``count`` rows (MySQL, MariaDB), with the same rules.

    There is no WHERE here, so each assignment carries the condition itself, and MySQL runs them left to
    right, each seeing the columns assigned before it. So the two that need the row as it was come first:
    ``updated_at`` and ``observed_at`` move only for a newer snapshot that differs. After them,
    ``observed_at`` equal to the snapshot's means the row is moving forward (or already held this very
    snapshot, where the counters' assignments change nothing), and the counters follow it.
    """
    q = connection.ops.quote_name
    if connection.mysql_is_mariadb or connection.mysql_version < (8, 0, 19):  # type: ignore[attr-defined]
        alias, new = "", "VALUES({})".format  # MariaDB has no row alias; MySQL deprecates VALUES() from 8.0.20
    else:
        alias, new = " AS new", "new.{}".format

    def offered(column: str) -> str:  # the value in the row being inserted; q(column) is the stored one
        return new(q(column))

    differs = " OR ".join(f"{q(c)} <> {offered(c)}" for c in COUNTERS)
    forward = f"{q('observed_at')} < {offered('observed_at')} AND ({differs})"
    moving = f"{q('observed_at')} = {offered('observed_at')}"
    sets = [f"{q(c)} = IF({forward}, {offered(c)}, {q(c)})" for c in ("updated_at", "observed_at")]
    sets += [f"{q(c)} = IF({moving}, GREATEST({q(c)}, {offered(c)}), {q(c)})" for c in MONOTONIC]
    sets.append(f"{q('cost_micros')} = IF({moving}, {offered('cost_micros')}, {q('cost_micros')})")
    return f"{_insert_sql(count)}{alias} ON DUPLICATE KEY UPDATE {', '.join(sets)}"


def _insert_sql(count: int) -> str:
    q = connection.ops.quote_name
    row = "(" + ", ".join(["%s"] * len(_COLUMNS)) + ")"
    columns = ", ".join(q(c) for c in _COLUMNS)
    return f"INSERT INTO {q(UsageRecord._meta.db_table)} ({columns}) VALUES {', '.join([row] * count)}"


def _count_written(cursor: Any, observed_at: datetime, stamp: datetime, days: set[date]) -> int:
    """The rows just inserted or moved forward (MySQL, MariaDB): those carrying this snapshot and this write's stamp.

    MySQL's row count cannot tell an inserted row from one left as it was (Django connects with
    CLIENT_FOUND_ROWS: both count 1). The rows are still locked by this transaction, so none has changed since.
    """
    q = connection.ops.quote_name
    ordered = sorted(days)
    cursor.execute(
        f"SELECT COUNT(*) FROM {q(UsageRecord._meta.db_table)} WHERE {q('observed_at')} = %s "
        f"AND {q('updated_at')} = %s AND {q('day')} IN ({', '.join(['%s'] * len(ordered))})",
        [*_adapt((observed_at, stamp)), *_adapt(ordered)],
    )
    return int(cursor.fetchone()[0])


#: The statement each database vendor (``connection.vendor``) upserts with; no other can be flushed to.
_UPSERTS: dict[str, Callable[[int], str]] = {
    "postgresql": _on_conflict_sql,
    "sqlite": _on_conflict_sql,
    "mysql": _on_duplicate_key_sql,  # MariaDB too: Django's vendor for both
}
#: The database vendors (``connection.vendor``) the flush writes to; the system check usage.E001 reports any other.
SUPPORTED_VENDORS = tuple(_UPSERTS)


def _adapt(row: Sequence[Any]) -> Iterator[Any]:
    # Raw SQL bypasses the fields' own conversion: dates and datetimes as the backend stores them.
    ops = connection.ops
    for value in row:
        if isinstance(value, datetime):
            yield ops.adapt_datetimefield_value(value)
        elif isinstance(value, date):
            yield ops.adapt_datefield_value(value)
        else:
            yield value


def _subscription_id(client: str) -> int | None:
    kind, _, ident = client.partition(".")
    return int(ident) if kind == "s" and ident.isdigit() else None


def _chunks(items: Iterator[Any], size: int) -> Iterator[list[Any]]:
    while chunk := list(islice(items, size)):
        yield chunk
