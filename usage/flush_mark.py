"""The ``quota_usage_flush_lag_seconds`` gauge: how old the oldest usage not yet in the database may be.

A flush copies every counter as it was at its start; what was counted after that waits for the next one.
So ``Redis time now - the last completed flush's start`` (kept in Redis for every process to read, see
:meth:`~quotas.store.back_office.BackOffice.mark_flushed`) is the age of the oldest usage that may not be in
the database yet, which keeps growing while flushes fail or no worker runs them, as an alert wants.
"""

from __future__ import annotations

from collections.abc import Iterator

from quotas.internal_api import back_office
from quotas.metrics_exposition import DefaultSeries


def flush_lag_series() -> Iterator[DefaultSeries]:
    """``quota_usage_flush_lag_seconds`` at each scrape (no series before the first flush completes)."""
    lag = back_office().flush_lag()
    if lag is not None:
        yield {}, round(lag, 3)
