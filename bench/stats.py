"""Summaries of timing samples."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile of already sorted values."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return float(sorted_values[rank - 1])


def summarize_ns(samples_ns: Sequence[int]) -> dict[str, float]:
    """Median and p99 of nanosecond samples, in microseconds."""
    values = sorted(samples_ns)
    return {
        "median_us": round(statistics.median(values) / 1000, 2),
        "p99_us": round(percentile(values, 0.99) / 1000, 2),
        "samples": len(values),
    }
