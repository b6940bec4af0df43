"""Decisions counted before the metrics are read: the hook between the ledger and every reader.

A request appends its decision to the ledger (quotas/observability/ledger.py)
instead of updating the metrics, and the ledger adds its fold to
:data:`folders`. :func:`fold` runs them: :class:`Folding`, which
quotas/metrics.py registers in the default registry before the decisions'
metrics, whenever that registry is collected (a scrape, ``get_sample_value``),
and :func:`quotas.metrics.exposition` before it reads the files of several
processes. :func:`observe_all` adds many durations to a histogram at once.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence

from prometheus_client import Histogram
from prometheus_client.metrics_core import Metric

#: What :func:`fold` calls: each counts the decisions its owner recorded and did not count yet.
folders: list[Callable[[], None]] = []


def fold() -> None:
    """Count every decision recorded and not yet counted; whatever reads the metrics calls it first."""
    for folder in folders:
        folder()


class Folding:
    """A collector that yields nothing and folds: registered before the decisions' metrics, it runs first."""

    def collect(self) -> list[Metric]:
        fold()
        return []


def observe_all(histogram: Histogram, amounts: Sequence[float]) -> None:
    """``histogram.observe(amount)`` for each of ``amounts``, in order, each bucket added to once.

    Through prometheus_client's own attributes, as its ``observe`` uses them (tests/metrics/test_metrics.py
    checks both give the same samples): 5,000 to 7,400 instructions less per decision the ledger folds than
    ``observe`` (cachegrind: 2,000 decisions recorded and folded, of one client or each of another).
    """
    bounds = histogram._upper_bounds
    per_bucket = [0] * len(bounds)
    add = histogram._sum.inc
    for amount in amounts:
        add(amount)  # one by one: the very sum observe() makes
        per_bucket[bisect_left(bounds, amount)] += 1  # the first bound >= amount, as observe() finds it
    for bucket, n in zip(histogram._buckets, per_bucket, strict=True):
        if n:
            bucket.inc(n)
