"""Request latency and 5xx share of one process, measured by :class:`adaptive.middleware.LoadReporterMiddleware`.

On the request path the middleware takes one ``perf_counter`` pair and appends ``(seconds, status)`` to
:data:`RESPONSES`, a bounded deque (its ``append`` is atomic, so no lock is taken). Everything else happens in
the reporter's thread at report time: :func:`drain` empties the deque and :func:`response_signals` turns an
interval's responses into the sample's fields:

* ``latency_ms``: the p90 of the interval's response times, in milliseconds, and ``latency`` the load figure
  ``latency_ms / LATENCY_TARGET_MS`` (1.0 = at target);
* ``error_rate``: the share of responses with status >= 500, and ``errors`` the load figure
  ``error_rate / ERROR_RATE_TARGET``.

An interval with fewer than ``MIN_RESPONSES`` responses says nothing (all four are None: unavailable, never
zero): one slow request or one 500 on a quiet host is no load, and cutting limits would not help it.

The time measured is until the view's response object exists: a streamed body is not included.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from typing import Any

from .conf import adaptive_settings

#: What the deque holds at most (about 1 MB): 10,000 responses in one reporting interval is several times what one
#: Python process serves in a second. Beyond it the oldest fall out, so the p90 is the latest 10,000's, and memory
#: stays bounded while reporting is off (REPORT_INTERVAL = 0) and nothing drains the deque.
MAX_RESPONSES = 10_000

#: ``(seconds, status)`` of each response since the reporter last drained it.
RESPONSES: deque[tuple[float, int]] = deque(maxlen=MAX_RESPONSES)

#: The percentile of response times the latency signal reports.
PERCENTILE = 0.9
#: Statuses from this one up count as errors (5xx: the server failed, not the client).
SERVER_ERROR = 500


def drain(responses: deque[tuple[float, int]] = RESPONSES) -> list[tuple[float, int]]:
    """Take every response recorded so far out of ``responses`` (safe while request threads append)."""
    taken = []
    # popleft is atomic: an append racing with this loop is either taken now or left for the next interval.
    for _ in range(len(responses)):
        taken.append(responses.popleft())
    return taken


def percentile(values: Iterable[float], share: float = PERCENTILE) -> float:
    """The nearest-rank percentile of ``values`` (not empty): the smallest value at least ``share`` of them
    are at or below."""
    ordered = sorted(values)
    rank = max(1, math.ceil(share * len(ordered)))
    return ordered[rank - 1]


def response_signals(
    responses: list[tuple[float, int]], latency_target_ms: float, error_rate_target: float, min_responses: int
) -> dict[str, Any]:
    """The sample's response fields for one interval's ``responses`` (see the module docstring)."""
    if len(responses) < max(1, min_responses):
        return {"latency_ms": None, "latency": None, "error_rate": None, "errors": None}
    p90_ms = percentile(seconds for seconds, _ in responses) * 1000
    error_rate = sum(1 for _, status in responses if status >= SERVER_ERROR) / len(responses)
    return {
        "latency_ms": round(p90_ms, 3),
        "latency": _load(p90_ms, latency_target_ms),
        "error_rate": round(error_rate, 4),
        "errors": _load(error_rate, error_rate_target),
    }


def _load(value: float, target: float) -> float | None:
    # A target <= 0 is reported at start-up (adaptive.E013, E014); until it is fixed the figure is unavailable,
    # and the rest of the sample is still published.
    return round(value / target, 4) if target > 0 else None


def interval_signals(responses: deque[tuple[float, int]] = RESPONSES) -> dict[str, Any]:
    """The response fields of the interval since the last call, against the configured targets (drains
    ``responses``; the reporter thread calls it once per sample)."""
    s = adaptive_settings
    return response_signals(
        drain(responses), float(s.LATENCY_TARGET_MS), float(s.ERROR_RATE_TARGET), int(s.MIN_RESPONSES)
    )
