"""Decisions counted before the metrics are read: the hook between the ledger and every reader, and the
histogram a fold adds a batch of durations to.

A request appends its decision to the ledger (quotas/observability/ledger.py)
instead of updating the metrics, and the ledger adds its fold to
:data:`folders`. :func:`fold` runs them: :class:`Folding`, which
quotas/metrics.py registers in the default registry before the decisions'
metrics, whenever that registry is collected (a scrape, ``get_sample_value``),
and :func:`quotas.metrics_exposition.exposition` before it reads the files of several
processes.

A fold adds many durations to a histogram at once, which prometheus_client's
``Histogram`` cannot take through its public API but one ``observe()`` per
duration: 5,000 to 7,400 instructions more per decision than adding each
bucket's share once (cachegrind, 2,000 decisions recorded and folded). So
:class:`BatchHistogram` keeps each bucket's count in a ``Counter`` of its own
and the sum in a ``Gauge``, each added to once per batch, and shows them as the
one histogram ``Histogram`` would show (:class:`Batched` does so for the files
of several processes).
"""

from __future__ import annotations

import math
import threading
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import accumulate

from prometheus_client import Counter, Gauge
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

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


def _le(bound: float) -> str:
    """A bucket's ``le`` label, written as prometheus_client writes it (``0.1``, ``5e-05``, ``+Inf``)."""
    return "+Inf" if bound == math.inf else repr(bound)


class BatchChild:
    """One label set of a :class:`BatchHistogram`: its buckets' counters and its sum."""

    def __init__(self, bounds: Sequence[float], buckets: Sequence[Counter], total: Gauge) -> None:
        self.bounds = bounds
        self.buckets = buckets
        self.total = total

    def observe_all(self, amounts: Sequence[float]) -> None:
        """``Histogram.observe(amount)`` for each of ``amounts``: each bucket and the sum added to once."""
        # Each amount's bucket is the first bound >= it, as observe() finds it: the amounts sorted in C (float
        # compares), each bucket's share is one bisect, about 400 instructions less per amount than one each.
        ordered = sorted(amounts)
        self.total.inc(sum(amounts, 0.0))  # in the order observed, as observe() adds them
        below = 0
        for bucket, bound in zip(self.buckets, self.bounds, strict=True):
            upto = bisect_right(ordered, bound, below)
            if upto > below:
                bucket.inc(upto - below)
                below = upto


class BatchHistogram:
    """A histogram its observations reach in batches (a collector: register it where it should be read).

    Each bucket's own count is a ``Counter`` (one series per label set and
    ``le``) and the sum a ``Gauge`` (an observation may be negative, as
    ``Histogram``'s may; under ``PROMETHEUS_MULTIPROC_DIR`` it sums over
    processes, dead ones included, as counters do). Neither is in a registry:
    :meth:`collect` shows this process's as the histogram ``<name>`` (samples
    ``_bucket{le}``, cumulative, ``_count`` and ``_sum``; no ``_created``), and
    :class:`Batched` shows every process's, read from their files.
    """

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str], buckets: Sequence[float]) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self.bounds = (*sorted(float(bound) for bound in buckets if bound != math.inf), math.inf)
        self.les = tuple(_le(bound) for bound in self.bounds)
        self.bucket_family, self.sum_family = f"{name}_batch_buckets", f"{name}_batch_sum"
        self._buckets = Counter(
            self.bucket_family, f"Each bucket's own count of {name}.", [*self.labelnames, "le"], registry=None
        )
        self._sums = Gauge(
            self.sum_family, f"The sum of {name}.", self.labelnames, registry=None, multiprocess_mode="sum"
        )
        self._children: dict[tuple[str, ...], BatchChild] = {}
        self._lock = threading.Lock()

    def labels(self, *values: str) -> BatchChild:
        """The child of these label values (created at 0 in every bucket, so its series show from now on)."""
        child = self._children.get(values)
        if child is None:
            with self._lock:
                child = self._children.get(values)
                if child is None:
                    buckets = [self._buckets.labels(*values, le) for le in self.les]
                    child = self._children[values] = BatchChild(self.bounds, buckets, self._sums.labels(*values))
        return child

    def describe(self) -> list[Metric]:
        return [HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)]

    def collect(self) -> list[Metric]:
        """This process's observations (its own registry: tests, ``runserver``)."""
        return [self.histogram([*self._buckets.collect(), *self._sums.collect()])]

    def histogram(self, families: Iterable[Metric]) -> HistogramMetricFamily:
        """The histogram this one's bucket and sum families among ``families`` make."""
        index = {le: i for i, le in enumerate(self.les)}
        counts: dict[tuple[str, ...], list[float]] = {}
        sums: dict[tuple[str, ...], float] = {}
        for family in families:
            for sample in family.samples:
                key = tuple(sample.labels[name] for name in self.labelnames)
                if family.name == self.sum_family:
                    sums[key] = sums.get(key, 0.0) + sample.value
                elif family.name == self.bucket_family and sample.name.endswith("_total"):
                    at = index.get(sample.labels["le"])
                    if at is not None:  # a bucket of another deployment's buckets: no place in these
                        counts.setdefault(key, [0.0] * len(index))[at] += sample.value
        out = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for key, per_bucket in counts.items():
            out.add_metric(key, list(zip(self.les, accumulate(per_bucket), strict=True)), sums.get(key, 0.0))
        return out


class Batched:
    """The families of ``source``, each :class:`BatchHistogram`'s counters among them shown as its histogram
    (for prometheus_client's ``MultiProcessCollector``, which reads them from every process's files)."""

    def __init__(self, source: Collector, histograms: Sequence[BatchHistogram]) -> None:
        self.source = source
        self.histograms = histograms

    def collect(self) -> Iterator[Metric]:
        owners = {name: h for h in self.histograms for name in (h.bucket_family, h.sum_family)}
        held: dict[str, list[Metric]] = {h.name: [] for h in self.histograms}
        for family in self.source.collect():
            owner = owners.get(family.name)
            if owner is None:
                yield family
            else:
                held[owner.name].append(family)
        for histogram in self.histograms:
            if held[histogram.name]:
                yield histogram.histogram(held[histogram.name])
