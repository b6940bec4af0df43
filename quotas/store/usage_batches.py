"""Usage counted in-process: kept while Redis cannot take it, written in batches, spooled at exit.

Every batch is written exactly once. The buffer numbers its batches, and the
script that adds one to a usage hash (``lua/usage_add.lua``) remembers in
that hash the last batch of this writer it took: a batch written again after
a failure that hid whether it arrived, or replayed from a spool file twice,
is skipped where it already landed.

Spool files are for a process that exits while Redis is down. They live in a
private directory (mode 0700, owned by this user) named after the Redis URL
and key prefix, so two projects on one host never replay each other's, and
each is signed with SECRET_KEY: a file anyone else wrote there is refused,
not replayed as counts on some tenant's usage.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import os
import stat
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from django.core import signing

from quotas import metrics
from quotas.clock import SYSTEM_CLOCK, Clock
from quotas.contract.protocol import usage_add_args
from quotas.settings import quota_settings
from quotas.store.backends.connect import STORE_ERRORS
from quotas.store.money.budget_day import day_of

logger = logging.getLogger(__name__)

#: (usage key base, day "YYYYMMDD", field) -> amount
Counts = dict[tuple[str, str, str], int]

_SALT = "quotas.usage_spool"
#: A claimed spool file whose replay has not finished after this long was left
#: by a process that died while replaying it; another process takes it over.
STALE_CLAIM_SECONDS = 60.0


@dataclass(slots=True)
class Batch:
    """Counts written to Redis together, once: ``seq`` orders them per writer; ``oldest`` is when (monotonic)
    the oldest request they count happened (0: not known, as for a batch read back from a spool file)."""

    seq: int
    counts: Counts
    oldest: float = 0.0


class UsageBuffer:
    """Usage counted in-process, added to Redis in numbered batches.

    It holds the refusals a process answers from its memory of over-limit
    clients, and every decision made while Redis is unreachable (failure mode
    ``local``). The rules poller flushes it every ``RULES_CHECK_INTERVAL``;
    a batch that cannot be written stays for the next try, and a process that
    exits while Redis is still down writes its batches to a spool file that
    any process replays once Redis answers. A process killed outright loses
    at most one interval's worth.
    """

    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self.clock = clock  # the runtime's: a request's usage day, and when it was counted
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._start()

    def _start(self) -> None:
        # A forked child (gunicorn with preload, multiprocessing) starts empty, under its own
        # name: the parent still writes what it counted, and two processes writing numbered
        # batches under one name would skip each other's.
        self._pid = os.getpid()
        self.writer = uuid.uuid4().hex  # names this process's batches in the hashes' "~w:" fields
        self._counts: defaultdict[tuple[str, str, str], int] = defaultdict(int)
        self._oldest = 0.0  # when (monotonic) the oldest request in _counts happened; 0: none
        self._pending: list[Batch] = []
        self._seq = itertools.count()

    def add(
        self, key_base: str, field: str, amount: int = 1, day: str | None = None, *, since: float | None = None
    ) -> None:
        """Count ``amount`` on ``field`` of the usage hash ``key_base`` of ``day`` (default: today in
        ``BUDGET_TIME_ZONE``, where usage days begin).

        ``since`` is when (the clock's ``monotonic()``) the oldest request counted happened, if earlier than now (an
        allowance's requests are counted after they were served): what ``quota_usage_write_lag_seconds``
        measures from.
        """
        day = day or day_of(self.clock.now())
        since = self.clock.monotonic() if since is None else since
        with self._lock:
            if self._pid != os.getpid():
                self._start()
            self._counts[key_base, day, field] += amount
            if not self._oldest or since < self._oldest:
                self._oldest = since

    def take(self) -> list[Batch]:
        """Every batch not yet written, oldest first, with what was counted since the last one as a new batch.

        The caller writes them in order and hands back (:meth:`keep`) those
        it could not write.
        """
        with self._lock:
            if self._pid != os.getpid():
                self._start()
            counts, self._counts = self._counts, defaultdict(int)
            oldest, self._oldest = self._oldest, 0.0
            if counts:
                self._pending.append(Batch(next(self._seq), dict(counts), oldest))
            pending, self._pending = self._pending, []
        return pending

    def keep(self, batches: list[Batch]) -> None:
        """Put back batches that were not written, ahead of any taken since (they must go first)."""
        with self._lock:
            self._pending[:0] = batches

    def flush(self, client: Any) -> bool:
        """Write every pending batch to Redis in order; True when all were written."""
        with self._flush_lock:
            batches = self.take()
            for i, batch in enumerate(batches):
                try:
                    write_batch(client, self.writer, batch)
                except STORE_ERRORS:
                    self.keep(batches[i:])
                    logger.warning("quotas: could not write %d batches of local usage; keeping them", len(batches) - i)
                    return False
                if batch.oldest:
                    metrics.observe_usage_write_lag(self.clock.monotonic() - batch.oldest)
            return True

    def spool(self) -> Path | None:
        """Write every pending batch to a signed spool file (at exit, with Redis down); returns its path."""
        with self._flush_lock:
            batches = self.take()
            if not batches:
                return None
            return spool_batches(self.writer, batches)

    def __bool__(self) -> bool:
        return bool(self._counts or self._pending)


def write_batch(client: Any, writer: str, batch: Batch) -> None:
    """Add ``batch`` to its usage hashes (one script call per hash; a hash that has it already skips it)."""
    from quotas.contract.library import script_source  # off the request path: EVALSHA on any server

    script = client.register_script(script_source("usage_add"))
    per_key: defaultdict[tuple[str, str], list[Any]] = defaultdict(list)
    for (base, day, field), amount in batch.counts.items():
        per_key[base, day].extend((field, amount))
    for (base, day), pairs in sorted(per_key.items()):
        days = (date(int(day[:4]), int(day[4:6]), int(day[6:])) - date(1970, 1, 1)).days
        script(keys=[f"{base}:{day}"], args=usage_add_args(days, writer, batch.seq, pairs))


def spool_dir() -> Path | None:
    """This project's private spool directory (created 0700), or None when it is not safe to use.

    ``USAGE_SPOOL_DIR`` (default: ``quotas-usage-spool-<uid>`` in the system
    temp directory) holds one subdirectory per Redis URL and key prefix.
    """
    configured = quota_settings.USAGE_SPOOL_DIR
    base = Path(configured) if configured else Path(tempfile.gettempdir()) / f"quotas-usage-spool-{os.getuid()}"
    namespace = hashlib.sha256(f"{quota_settings.REDIS_URL}\0{quota_settings.KEY_PREFIX}".encode()).hexdigest()[:16]
    folder = base / namespace
    for path in (base, folder):
        try:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
            info = path.lstat()
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
                raise PermissionError(f"{path} is not a directory owned by this user")
            if info.st_mode & 0o077:
                os.chmod(path, 0o700)  # ours: make it private rather than refuse
        except OSError as exc:
            logger.error("quotas: usage spool directory %s unusable (%s); set QUOTAS['USAGE_SPOOL_DIR']", path, exc)
            return None
    return folder


def spool_batches(writer: str, batches: list[Batch]) -> Path | None:
    """Write ``batches`` to a new signed file in the spool directory; returns its path (None if impossible)."""
    rows = sum(len(b.counts) for b in batches)
    folder = spool_dir()
    if folder is None:
        logger.error("quotas: Redis unreachable at exit and no spool directory: %d usage counters lost", rows)
        return None
    payload = {
        "writer": writer,
        "batches": [
            {"seq": b.seq, "rows": [[base, day, field, n] for (base, day, field), n in b.counts.items()]}
            for b in batches
        ],
    }
    path = folder / f"{os.getpid()}-{time.time_ns()}.spool"
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(signing.dumps(payload, salt=_SALT, compress=True))
    tmp.rename(path)  # readers only ever see whole files
    logger.warning("quotas: Redis unreachable at exit; %d usage counters spooled to %s", rows, path)
    return path


def replay_spool(client: Any) -> int:
    """Add every spooled file's usage to Redis, exactly once; returns the files replayed.

    A file is claimed by a rename, so only one process replays it; a claim
    left by a process that died meanwhile is taken over after
    :data:`STALE_CLAIM_SECONDS` (or at once when that process is gone).
    Replaying a file again after a partial replay adds only what is missing.
    A file whose signature does not verify is set aside as ``.rejected``.
    """
    folder = spool_dir()
    if folder is None:
        return 0
    replayed = 0
    for path in sorted(folder.glob("*.spool")) + sorted(folder.glob("*.replaying")):
        claimed = claim(path)
        if claimed is None:
            continue
        try:
            payload = signing.loads(claimed.read_text(), salt=_SALT)
            writer = str(payload["writer"])
            batches = [
                Batch(int(b["seq"]), {(r[0], r[1], r[2]): int(r[3]) for r in b["rows"]}) for b in payload["batches"]
            ]
        except (signing.BadSignature, ValueError, KeyError, TypeError, IndexError):
            logger.error("quotas: spool file %s is not signed with this SECRET_KEY or unreadable; not replayed", path)
            claimed.rename(claimed.with_name(path.stem.split(".")[0] + ".rejected"))
            continue
        try:
            for batch in batches:
                write_batch(client, writer, batch)
        except STORE_ERRORS:
            claimed.rename(path.with_name(path.stem.split(".")[0] + ".spool"))  # for the next try
            return replayed
        claimed.unlink()
        replayed += 1
    return replayed


def claim(path: Path, claimed_suffix: str = ".replaying") -> Path | None:
    """Rename spool file ``path`` to this process's claim on it (``<name>.<pid><claimed_suffix>``), or None if
    another live process holds it (a claim whose process died, or older than any replay, is taken over)."""
    if path.suffix == claimed_suffix and not _abandoned(path):
        return None
    claimed = path.with_name(f"{path.name.split('.')[0]}.{os.getpid()}{claimed_suffix}")
    if claimed == path:
        return None  # ours, being replayed by another thread of this process
    try:
        path.rename(claimed)
        os.utime(claimed)  # the claim's age, not the file's, tells a stale claim
    except OSError:
        return None  # another process took it
    return claimed


def _abandoned(path: Path) -> bool:
    """Whether a claimed file's replayer is gone (dead process, or a claim older than any replay)."""
    try:
        pid = int(path.name.split(".")[1])
        age = time.time() - path.stat().st_mtime
    except (ValueError, IndexError, OSError):
        return False
    if age > STALE_CLAIM_SECONDS:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False
