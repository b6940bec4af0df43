"""Usage history for operators: per minute for 2 hours, per hour for 7 days, recorded off the request path.

Each decision is noted in this process: appended to the ledger on the request
path (quotas/observability/ledger.py), then folded here before every write and
read (:meth:`History.add`: a few dict increments under a lock, no Redis). The
runtime's poller thread writes the notes about once a second
(:meth:`History.write`, from ``Runtime.tick``) through the
store's :class:`~quotas.store.history_store.HistoryStore`, in one pipeline: a hash
per UTC minute and per UTC hour of each plan's and scope's counters, the top clients
of each hour, and each subscriber's own minutes (the keys, and how long each is
kept, are described there).

Counters are the usage counters' names (:data:`quotas.contract.protocol.USAGE_COUNTERS`)
plus ``dl``: refused from this process's memory of clients over a limit, without asking Redis
(the metrics' reason "local"; the usage counters count these as ``dr``).
Notes that fail to reach Redis are kept for the next write. A process killed
between writes loses at most about a second of *history*; billed usage is
counted by the decision script itself and loses nothing. Should a connection
drop after Redis applied a write but before the reply, the retry counts that
second twice (history is for operators' eyes, not billing).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from quotas.clock import SYSTEM_CLOCK, Clock
from quotas.contract.protocol import UsageCounter as Counter
from quotas.observability.ledger import LEDGER, Run

# The keys, what they keep and how they are read belong to the store; the apps read the format here.
from quotas.store.history_store import (
    CLIENT_KEEP,
    DENIED_COUNTERS,
    DENIED_LOCAL,
    HISTORY_COUNTERS,
    HOUR_KEEP,
    MINUTE_KEEP,
    TOP_KEEP,
    TOP_SIDES,
    ClientPoint,
    HistoryBucket,
    HistoryStore,
    Resolution,
    bucket_starts,
)

#: The counters one decision adds 1 to, by its metrics labels (see ``record.labels``).
#: A shadow-denied request was admitted, so it counts as allowed too (as in the usage counters).
COUNTERS_OF: dict[tuple[str, str], tuple[str, ...]] = {
    ("allowed", "none"): (Counter.ALLOWED,),
    ("shadow_denied", "none"): (Counter.ALLOWED, Counter.SHADOW_WOULD_DENY),
    ("denied", "rate"): (Counter.DENIED_RATE,),
    ("denied", "budget"): (Counter.DENIED_BUDGET,),
    ("denied", "capacity"): (Counter.DENIED_CAPACITY,),
    ("denied", "banned"): (Counter.DENIED_BANNED,),
    ("denied", "local"): (DENIED_LOCAL,),
    ("denied", "acl"): (Counter.DENIED_ACL,),
}
#: Client tags (without braces) whose per-client history is kept: subscriptions (quotas.contract.keys).
CLIENT_KINDS = ("s.",)


class History:
    """This process's history notes since its last write (one per runtime, like ``KeyUse``)."""

    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self.now = clock.now  # the runtime's clock: what a decision's note is dated with (bound once)
        # A lock because "+= 1" on a dict is a read then a write: two request threads could lose one.
        self._lock = threading.Lock()
        self._counts: dict[tuple[int, str], int] = {}  # (minute since epoch, field) -> count
        self._top: dict[tuple[int, str, str], int] = {}  # (hour since epoch, "a"/"d", client) -> count
        self._clients: dict[tuple[int, str, str], int] = {}  # (minute since epoch, client, "a"/"d") -> count
        self.serial = LEDGER.register(self)  # how the ledger's entries name this history

    def note(self, plan: str | None, scope: str, outcome: str, reason: str, client_tag: str, *, at: float) -> None:
        """Count one decision (``outcome``/``reason`` as :func:`record.labels` names them) at ``at`` (epoch s)."""
        self.add({(plan, scope, outcome, reason, client_tag, at // 60, self.serial): 1})

    def add(self, runs: Mapping[Run, int]) -> None:
        """Count decisions as the ledger (quotas/observability/ledger.py) folds them, off the request path: each
        run of alike decisions (the same labels, client and minute) that names this history, as many as it maps to."""
        with self._lock:
            counts, tops, clients = self._counts, self._top, self._clients
            mine = self.serial
            for (plan, scope, outcome, reason, client_tag, at_minute, serial), n in runs.items():
                if serial != mine:  # another history's, or none's (the ledger hands each history every run)
                    continue
                minute = int(at_minute)
                for counter in COUNTERS_OF.get((outcome, reason), ()):
                    field = (minute, f"{plan or '-'}|{scope or '-'}|{counter}")
                    counts[field] = counts.get(field, 0) + n
                side = "d" if outcome == "denied" else "a"
                client = client_tag.strip("{}")
                top = (minute // 60, side, client)
                tops[top] = tops.get(top, 0) + n
                if client.startswith(CLIENT_KINDS):
                    own = (minute, client, side)
                    clients[own] = clients.get(own, 0) + n

    def pending(self) -> int:
        """How many counter increments wait for the next write (for tests and debugging)."""
        LEDGER.fold()
        with self._lock:
            return sum(self._counts.values())

    def write(self, store: HistoryStore) -> None:
        """Add the notes to the store's history.

        Raises :class:`~quotas.exceptions.StoreUnavailable` when Redis fails; the notes are then kept for the
        next try.
        """
        LEDGER.fold()  # the decisions recorded since the last write
        with self._lock:
            counts, self._counts = self._counts, {}
            top, self._top = self._top, {}
            clients, self._clients = self._clients, {}
        if not counts and not top and not clients:
            return
        try:
            store.write(counts, top, clients)
        except Exception:
            with self._lock:
                _merge(self._counts, counts)
                _merge(self._top, top)
                _merge(self._clients, clients)
            raise


def _merge(into: dict[Any, int], counts: dict[Any, int]) -> None:
    for key, n in counts.items():
        into[key] = into.get(key, 0) + n


__all__ = [
    "CLIENT_KEEP",
    "CLIENT_KINDS",
    "COUNTERS_OF",
    "DENIED_COUNTERS",
    "DENIED_LOCAL",
    "HISTORY_COUNTERS",
    "HOUR_KEEP",
    "MINUTE_KEEP",
    "TOP_KEEP",
    "TOP_SIDES",
    "ClientPoint",
    "History",
    "HistoryBucket",
    "Resolution",
    "bucket_starts",
]
