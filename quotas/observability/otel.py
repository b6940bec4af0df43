"""OpenTelemetry: a span per decision, and OTel metrics beside the Prometheus ones (``QUOTAS['OPENTELEMETRY']``).

Written against the OpenTelemetry API alone (the ``opentelemetry`` extra), as
a library should be: nothing is exported unless the project configures an
SDK (a tracer and a meter provider with their exporters), and without one
every call here is the API's no-op. Off (the default), the request path pays
one settings read in :func:`quotas.observability.record.record_decision`.

Each decision made through the service becomes a span ``quota.decision``,
timed from the start of the check to its record, a child of whatever span is
current (a web framework's request span), with attributes:

- ``quota.plan``, ``quota.scope``: the client's plan slug and the view's scope
  (``""`` for none), as the Prometheus metrics label them;
- ``quota.outcome``, ``quota.reason``: allowed, denied or shadow_denied, and
  why (``none``, ``rate``, ``budget``, ``banned``, ``local``, ``capacity``, ``acl``);
- ``quota.windows``: how many windows decided it;
- ``quota.store.duration_ms``: the time the store layer took, the Redis
  round trip included (microseconds for a decision it answers in process,
  from an allowance or a remembered refusal; 0 for an allow or deny list entry).

The client is not an attribute: a span is often kept by a third party, and a
client tag names a user, a key or an address. The metrics are
``quota.decisions`` (a counter) and ``quota.decision.duration`` and
``quota.store.duration`` (histograms, seconds), with plan, scope, outcome and
reason as attributes.
"""

from __future__ import annotations

import time
from functools import lru_cache
from importlib import metadata
from importlib.util import find_spec
from typing import Any

#: The instrumentation scope's name, as an OTel backend shows it.
SCOPE = "django-quota-platform"


def available() -> bool:
    """Whether the OpenTelemetry API is installed."""
    try:
        return find_spec("opentelemetry.trace") is not None and find_spec("opentelemetry.metrics") is not None
    except ModuleNotFoundError:  # no opentelemetry package at all
        return False


class _Instruments:
    """The tracer and the meter's instruments, made once per process (OTel's proxies follow a provider set
    later, so making them before the project configures its SDK is fine)."""

    def __init__(self) -> None:
        from opentelemetry import metrics, trace  # an optional extra: imported only once switched on

        try:
            version = metadata.version("django-quota-platform")
        except metadata.PackageNotFoundError:  # run from a checkout that is not installed
            version = "0"
        self.tracer = trace.get_tracer(SCOPE, version)
        meter = metrics.get_meter(SCOPE, version)
        self.decisions = meter.create_counter(
            "quota.decisions", unit="{decision}", description="Quota decisions, by plan, scope, outcome and reason."
        )
        self.duration = meter.create_histogram(
            "quota.decision.duration", unit="s", description="Time to decide a request, store call included."
        )
        self.store_duration = meter.create_histogram(
            "quota.store.duration", unit="s", description="Time spent in the store call of a decision."
        )
        self.ok = trace.StatusCode.OK


@lru_cache(maxsize=1)
def _instruments() -> _Instruments:
    return _Instruments()


def record(
    plan: str | None, scope: str, outcome: str, reason: str, *, windows: int, started: float, store_seconds: float
) -> None:
    """One decision as a span (from ``started``, a ``time.perf_counter()`` reading, to now) and as metrics."""
    tools = _instruments()
    elapsed = time.perf_counter() - started
    attributes: dict[str, Any] = {
        "quota.plan": plan or "",
        "quota.scope": scope or "",
        "quota.outcome": outcome,
        "quota.reason": reason,
    }
    tools.decisions.add(1, attributes)
    tools.duration.record(elapsed, attributes)
    tools.store_duration.record(store_seconds, attributes)
    end_ns = time.time_ns()
    span = tools.tracer.start_span(
        "quota.decision",
        start_time=end_ns - int(elapsed * 1e9),
        attributes={
            **attributes,
            "quota.windows": windows,
            "quota.store.duration_ms": round(store_seconds * 1000, 3),
        },
    )
    # A refusal is the limiter working, not an error of the operation: the span's status stays OK (a
    # framework's request span marks the 429 as the response's status).
    span.set_status(tools.ok)
    span.end(end_time=end_ns)
