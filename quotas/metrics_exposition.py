"""The body of ``/metrics``: the metrics every process recorded (:mod:`quotas.metrics`), in the format the scraper
asks for, with the default series the apps register where no process has set them yet.

A default series is computed at each scrape by a provider of the app that owns the data (:func:`add_default_series`):
every plan's adaptive multiplier, this host's load signals, the usage flush's lag, the active bans, the feeds. It is
added only where no process has set the series, so it never masks a published value.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping

from prometheus_client import REGISTRY, CollectorRegistry, Gauge
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from quotas.metrics import DEFAULT_LABELS, decision_seconds, multiprocess_dir
from quotas.metrics_fold import Batched, fold

logger = logging.getLogger("quotas.metrics")  # where operators already look for the metrics' log lines

#: A series a scrape shows before any process has set it: its labels (raw values) and its value.
DefaultSeries = tuple[Mapping[str, object], float]
#: Default series of one metric by label set: the labels (bounded values) and the value.
_Wanted = dict[frozenset[tuple[str, str]], tuple[dict[str, str], float]]
#: What :func:`default_series` returns: per metric name, its gauge and its default series.
Defaults = dict[str, tuple[Gauge, _Wanted]]
_default_providers: dict[str, tuple[Gauge, Callable[[], Iterable[DefaultSeries]]]] = {}


def add_default_series(gauge: Gauge, provider: Callable[[], Iterable[DefaultSeries]]) -> None:
    """Have /metrics show the series ``provider`` returns wherever no process has set them yet.

    ``provider`` runs at every scrape (not at import: it may read the rules
    snapshot or settings). A series any process did set is shown as set: a
    default never masks a published value, which writing the value itself
    would do under ``mostrecent`` for as long as the default was the newer.
    Registering again for the same gauge replaces the provider.
    """
    _default_providers[_family(gauge).name] = (gauge, provider)


def default_series() -> Defaults:
    """Every registered provider's series by metric name and label set; a failing provider is logged and skipped."""
    out: Defaults = {}
    for name, (gauge, provider) in _default_providers.items():
        wanted: _Wanted = {}
        try:
            for raw, value in provider():
                labels = {label: DEFAULT_LABELS[label].admit(v) for label, v in raw.items()}
                admitted = {label: v for label, v in labels.items() if v is not None}
                if len(admitted) == len(labels):  # a value past its label's bound gets no series of its own
                    wanted.setdefault(frozenset(admitted.items()), (admitted, float(value)))
        except Exception as exc:  # a scrape must not fail for want of defaults (e.g. no database yet)
            logger.warning("quotas.metrics: default series of %s unavailable: %s", name, exc)
            continue
        out[name] = (gauge, wanted)
    return out


class _WithDefaults:
    """A registry's families, each missing default series added (and a family nobody set yet, made)."""

    def __init__(self, registry: Collector, defaults: Defaults) -> None:
        self.registry = registry
        self.defaults = defaults

    def collect(self) -> Iterator[Metric]:
        missing = dict(self.defaults)
        for family in self.registry.collect():
            entry = missing.pop(family.name, None)
            if entry is not None:
                _add_missing(family, entry[1])
            yield family
        for gauge, wanted in missing.values():
            family = _family(gauge)
            _add_missing(family, wanted)
            if family.samples:
                yield family


def _family(gauge: Gauge) -> Metric:
    """A new, empty family of ``gauge``: its name, help and type."""
    return next(iter(gauge.describe()))


def _add_missing(family: Metric, wanted: _Wanted) -> None:
    present = {frozenset(sample.labels.items()) for sample in family.samples}
    for key, (labels, value) in wanted.items():
        if key not in present:
            family.add_sample(family.name, labels, value)


def exposition(accept: str = "", defaults: Defaults | None = None) -> tuple[bytes, str]:
    """The metrics of every process (or of this one) and their content type, as ``accept`` prefers.

    Prometheus' text format by default; OpenMetrics when ``accept`` asks for it.
    ``defaults`` (from :func:`default_series`) adds the series nobody set yet.
    """
    fold()  # this process's waiting decisions, into the files other processes read too
    registry: Collector = REGISTRY
    if multiprocess_dir():
        files = CollectorRegistry()
        MultiProcessCollector(files)
        registry = Batched(files, [decision_seconds])
    encoder, content_type = choose_encoder(accept)
    return encoder(_WithDefaults(registry, defaults) if defaults else registry), content_type
