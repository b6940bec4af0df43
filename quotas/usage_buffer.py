"""Usage counted in-process: kept while Redis cannot take it, written in batches, spooled at exit."""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

import redis

from .conf import quota_settings
from .store import STORE_ERRORS

logger = logging.getLogger(__name__)

USAGE_TTL_DAYS = 3  # usage hashes outlive their day by this much (USAGE_TTL_DAYS in usage.lua)


class UsageBuffer:
    """Usage counted in-process, added to Redis in batches.

    It holds the refusals a process answers from its memory of over-limit
    clients, and every decision made while Redis is unreachable (failure mode
    ``local``). The rules poller flushes it every ``RULES_CHECK_INTERVAL``;
    what cannot be written stays for the next try, and a process that exits
    while Redis is still down writes it to a spool file that any process
    replays once Redis answers. A process killed outright loses at most one
    interval's worth.
    """

    def __init__(self) -> None:
        self._counts: defaultdict[tuple[str, str, str], int] = defaultdict(int)
        self._lock = threading.Lock()

    def add(self, key_base: str, field: str, amount: int = 1, day: str | None = None) -> None:
        day = day or time.strftime("%Y%m%d", time.gmtime())
        with self._lock:
            self._counts[key_base, day, field] += amount

    def drain(self) -> dict[tuple[str, str, str], int]:
        with self._lock:
            counts, self._counts = self._counts, defaultdict(int)
        return counts

    def __bool__(self) -> bool:
        return bool(self._counts)


def write_usage(client: redis.Redis, counts: dict[tuple[str, str, str], int]) -> None:
    """HINCRBY buffered usage into the day hashes (one pipelined round trip)."""
    pipe = client.pipeline(transaction=False)
    for (base, day, name), amount in counts.items():
        key = f"{base}:{day}"
        pipe.hincrby(key, name, amount)
        day_start = int(time.mktime(time.strptime(day, "%Y%m%d"))) - time.timezone
        pipe.expireat(key, day_start + (1 + USAGE_TTL_DAYS) * 86400)  # as usage.lua does
    pipe.execute()


def _spool_dir() -> Path:
    configured = quota_settings.USAGE_SPOOL_DIR
    return Path(configured) if configured else Path(tempfile.gettempdir()) / "quotas-usage-spool"


def spool_usage(counts: dict[tuple[str, str, str], int]) -> None:
    """Write counts Redis could not take to a spool file (at process exit during an outage)."""
    folder = _spool_dir()
    folder.mkdir(parents=True, exist_ok=True)
    rows = [{"base": b, "day": d, "field": f, "amount": n} for (b, d, f), n in counts.items()]
    path = folder / f"{os.getpid()}-{time.time_ns()}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(rows))
    tmp.rename(path)  # readers only ever see whole files
    logger.warning("quotas: Redis unreachable at exit; %d usage counters spooled to %s", len(rows), path)


def replay_spool(client: redis.Redis) -> int:
    """Add spooled usage to Redis; each file is claimed by a rename, so only one process replays it."""
    folder = _spool_dir()
    if not folder.is_dir():
        return 0
    replayed = 0
    for path in sorted(folder.glob("*.json")):
        claimed = path.with_suffix(f".{os.getpid()}.replaying")
        try:
            path.rename(claimed)
        except OSError:
            continue  # another process took it
        counts: defaultdict[tuple[str, str, str], int] = defaultdict(int)
        for row in json.loads(claimed.read_text()):
            counts[row["base"], row["day"], row["field"]] += int(row["amount"])
        try:
            write_usage(client, counts)
        except STORE_ERRORS:
            claimed.rename(path)  # give it back for the next try
            return replayed
        claimed.unlink()
        replayed += 1
    return replayed
