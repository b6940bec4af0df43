"""This process's decisions not yet counted in the metrics and the history: one append per decision.

A decision's bookkeeping used to run on the request path: two Prometheus
children updated (each behind its own lock) and a history note (three dict
updates under a lock). Now :func:`quotas.observability.record.record_decision`
appends one tuple, an :data:`Entry`, to :data:`LEDGER` (``list.append`` is atomic
under the GIL: no lock on the request path), and :meth:`Ledger.fold` counts the
entries later, grouped, in one pass:

- before any reader sees the metrics: :func:`quotas.metrics_fold.fold`, which the
  registry's collection (every scrape, ``REGISTRY.get_sample_value``) and
  :func:`quotas.metrics_exposition.exposition` call first;
- before the history is written or read: :meth:`History.write
  <quotas.observability.history.History.write>` (the poller's tick, about once a
  second) and :meth:`History.pending <quotas.observability.history.History.pending>`;
- at every tick of the poller (about once a second);
- under ``PROMETHEUS_MULTIPROC_DIR``, every :data:`FOLD_EVERY` seconds on a
  thread of its own (the runtime's ``folding``): a scrape folds only the ledger
  of the process that serves it, and reads the others' from their files, so a
  decision reaches ``/metrics`` within :data:`METRICS_DELAY`, whichever process
  made it;
- at exit, and on the request path once :data:`FOLD_AT` entries wait (the poller
  thread may be dead or off: the ledger never grows without end).

Every decision is counted once, with the values it was recorded with (its
duration, the minute it was noted in), each label set's durations in the order
they were recorded; a child process starts with an empty ledger (its parent
counts what it recorded).
"""

from __future__ import annotations

import atexit
import itertools
import os
import threading
import weakref
from collections import Counter as TallyCounter
from collections.abc import Mapping
from operator import itemgetter
from typing import Protocol

from quotas import metrics, metrics_fold

#: One decision: its metrics labels (plan, scope, outcome, reason), its client's tag, the minute it was made in
#: (epoch seconds // 60, a float), the serial number of the history it is noted in (0: none, and minute 0.0), and
#: last its duration in seconds: all but the duration are its :data:`Run`, which a busy client's entries share.
#: Only strings, numbers and None, the history named by a number: the garbage collector stops tracking such a
#: tuple at its first pass, so a second's entries waiting for their fold add nothing to its later passes.
Entry = tuple[str | None, str | None, str, str, str, float, int, float]
#: An entry less its duration: the decisions a history counts alike (the same counters, minute and client).
Run = tuple[str | None, str | None, str, str, str, float, int]
_run = itemgetter(slice(0, 7))
_labels = itemgetter(slice(0, 4))
_seconds = itemgetter(7)
#: Entries waiting beyond this are folded by the request that appends the next: the poller folds about once a
#: second (a few hundred to a few thousand entries at full load), so this is reached only when it does not run.
FOLD_AT = 10_000
#: Under PROMETHEUS_MULTIPROC_DIR, seconds between two folds on each process's own thread: an empty fold is a
#: lock taken and a length read; a full one, a quarter second of a busy worker's decisions, a few milliseconds.
FOLD_EVERY = 0.25
#: How long a decision may take to reach /metrics, whichever process made it and whichever serves the scrape
#: (docs/operations.md): a fold's interval, with room for the fold thread to wait for the GIL on a busy host.
METRICS_DELAY = 0.5


class Notes(Protocol):
    """What the ledger needs of a history (:class:`~quotas.observability.history.History`)."""

    def add(self, runs: Mapping[Run, int]) -> None:
        """Count the decisions of each run that names this history, as many as it maps to."""


class Ledger:
    """The decisions this process recorded since the last fold (one per process: :data:`LEDGER`)."""

    def __init__(self) -> None:
        # Appended by requests (record.py holds its append: never replaced), taken from the front by fold() only.
        self.entries: list[Entry] = []
        self._lock = threading.Lock()  # one fold at a time: a reader waits for a fold under way to finish
        self._histories: weakref.WeakValueDictionary[int, Notes] = weakref.WeakValueDictionary()
        self._serials = itertools.count(1)

    def register(self, history: Notes) -> int:
        """The serial number entries name ``history`` by (while it lives: the notes of a history dropped
        before its entries were folded are dropped with it, as they were when it noted them itself)."""
        serial = next(self._serials)
        self._histories[serial] = history
        return serial

    def fold(self) -> None:
        """Count every waiting entry in the metrics and in its history."""
        with self._lock:
            entries = self.entries
            n = len(entries)
            if not n:
                return
            # Two steps, each atomic under the GIL; requests only append, beyond the first n.
            batch = entries[:n]
            del entries[:n]
            # Counted in C, without a Python step per entry (a busy client's differ by their duration only):
            # each run's decisions, then each label set's durations (one run of entries when there is one label
            # set, as often): about 4,000 instructions less per busy client's decision than a Python step each.
            runs = TallyCounter(map(_run, batch))
            durations: dict[tuple[str | None, str | None, str, str], list[float]] = {}
            for labels, alike in itertools.groupby(batch, _labels):
                seconds = list(map(_seconds, alike))
                same = durations.get(labels)
                if same is None:
                    durations[labels] = seconds
                else:
                    same += seconds
            for (plan, scope, outcome, reason), seconds in durations.items():
                metrics.observe_decision(plan, scope, outcome, reason, *seconds)
            for history in list(self._histories.values()):  # one a runtime: each counts the runs naming it
                history.add(runs)

    def forked(self) -> None:
        """In a child process just forked: the entries are the parent's, which counts them itself, and the
        lock may have been held by one of the parent's threads."""
        self.entries.clear()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.entries)


#: This process's ledger.
LEDGER = Ledger()
metrics_fold.folders.append(LEDGER.fold)
# Under PROMETHEUS_MULTIPROC_DIR the values live in files other processes read: what waits reaches them.
atexit.register(LEDGER.fold)
os.register_at_fork(after_in_child=LEDGER.forked)
