"""Prometheus metrics of the quota engine, and their exposition at ``/metrics``.

The engine, the throttle, the adaptive controller and the usage flush call the
small functions below (decisions through the ledger, quotas/metrics_fold.py);
:func:`quotas.metrics_exposition.exposition` renders what every process recorded.

**Bounded labels.** A label value is a plan slug, a view's ``quota_scope``, an
engine mode or another code-defined name, never a client, a key or a path.
Even so, each free-text label admits only its first few distinct values per
process (``MAX_SCOPES`` scopes, ``MAX_PLANS`` plans, ...); later ones, and
values that are not short ``[A-Za-z0-9_.:-]`` words, are counted as ``other``
(and in ``quota_metrics_label_overflow_total``), so a bug or an attacker can
never make the series count grow without bound.

**Several processes.** gunicorn workers and Celery processes each keep their
own counters. With ``PROMETHEUS_MULTIPROC_DIR`` set in the environment *before
the process starts* (``make run`` sets it to ``run/prometheus`` for gunicorn and
Celery alike, which share the directory), prometheus-client keeps every value
in a memory-mapped file there and the exposition sums them with its
``MultiProcessCollector``. ``config/gunicorn.py`` removes the live gauges of a
dead worker (``child_exit``) and stale files at start-up. Counters of exited
processes stay, so totals never go backwards. A process's decisions reach its
files within half a second: every quarter second on a thread of its own, at
its poller's tick, at exit, and when it serves the scrape itself (the ledger,
quotas/observability/ledger.py: ``METRICS_DELAY``); one killed outright loses
its last quarter second's. Gauges say how they combine:

- ``quota_engine_mode``: ``livemax``, 1 when any live process is in that mode;
- the adaptive multipliers and load signals, the usage flush lag and the
  active bans: ``mostrecent``, the last value any process set (they are
  published by one controller or task, possibly from a Celery child that is
  never reported dead).

Without the variable (tests, ``runserver``) the default registry of this
process is exposed.

**From the first scrape.** Series that exist before anything set them: the
Redis operations' errors, the failed-authentication outcomes, the engine
modes (below, at import), and, computed at each scrape by providers the apps
register (:func:`quotas.metrics_exposition.add_default_series`), every plan's adaptive multiplier and
this host's load signals. Those are added to the exposition only where no
process has set the series, so they never mask a published value.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable

from prometheus_client import REGISTRY, Counter, Gauge, Histogram

from quotas.fork_safe import ForkSafeLock
from quotas.metrics_fold import BatchChild, BatchHistogram, Folding

logger = logging.getLogger(__name__)

OTHER = "other"
NONE = "none"

OUTCOMES = frozenset({"allowed", "denied", "shadow_denied"})
REASONS = frozenset({"none", "rate", "budget", "acl", "capacity", "banned", "local"})
#: The engine's modes: deciding in Redis, or with the breaker open, by FAILURE_MODE: deciding locally
#: ("fallback"), admitting everything ("open") or refusing everything ("closed").
ENGINE_MODES = ("normal", "fallback", "open", "closed")
#: Operations whose Redis errors are counted; each series exists (at 0) from the first scrape.
REDIS_OPERATIONS = (
    "decide",
    "script",
    "count_acl",
    "reconcile",
    "refund",
    "release",
    "flush_usage",
    "lift_ban",
    "key_use",
    "history",
    "refusals",
    "allowance",
)

#: Distinct values each free-text label may take in one process before the rest count as ``other``.
MAX_PLANS = 20
MAX_SCOPES = 50
MAX_OPERATIONS = 20
MAX_SIGNALS = 20
MAX_HOSTS = 50
MAX_FEEDS = 20

#: Decision latency buckets, seconds: an in-process refusal takes ~50 us, a Redis round trip well under 1 ms,
#: a stalled one up to SOCKET_TIMEOUT (0.25 s by default, so the slowest land in +Inf).
DECISION_BUCKETS = (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1)

_LABEL_VALUE = re.compile(r"[A-Za-z0-9_.:-]{1,64}")


def multiprocess_dir() -> str | None:
    """The shared metrics directory, when several processes record metrics."""
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


_multiprocess_dir = multiprocess_dir()
if _multiprocess_dir:
    # Metrics without labels open their file as they are created, below; a missing directory would fail the import.
    os.makedirs(_multiprocess_dir, exist_ok=True)

# First in the registry: collecting it (a scrape, get_sample_value) folds the decisions recorded before any
# metric a fold changes is read (the label overflow below, the decisions and their durations).
REGISTRY.register(Folding())
label_overflow = Counter(
    "quota_metrics_label_overflow",
    "Label values counted as 'other' because the label had too many distinct values or an unsafe one.",
    ["label"],
)


class BoundedLabel:
    """Turns free text into a label value: the first ``limit`` distinct safe values, then ``other``.

    Empty values become ``none``. Thread-safe; the set only grows, so a value
    once admitted keeps its own series for the life of the process.
    """

    def __init__(self, name: str, limit: int) -> None:
        self.name = name
        self.limit = limit
        self.seen: set[str] = set()
        self._lock = ForkSafeLock()  # a parent's thread may hold it at a fork
        self._overflow = label_overflow.labels(name)

    def __call__(self, value: object) -> str:
        text = self.admit(value)
        if text is None:
            self._overflow.inc()
            return OTHER
        return text

    def admit(self, value: object) -> str | None:
        """The label value for ``value``, or None (counting nothing) where calling the label would give ``other``."""
        if value is None or value == "":
            return NONE  # not one of the bounded values: "none" whatever else was seen (as admits() says)
        text = str(value)
        if text in self.seen:  # the hot path: a set lookup, no lock
            return text
        if _LABEL_VALUE.fullmatch(text):
            with self._lock:
                if text in self.seen or len(self.seen) < self.limit:
                    self.seen.add(text)
                    return text
        return None

    def admits(self, value: object) -> bool:
        """Whether ``value`` is its own label value (or ``none``), now and for the life of the process."""
        return value is None or value == "" or str(value) in self.seen


plan_label = BoundedLabel("plan", MAX_PLANS)
scope_label = BoundedLabel("scope", MAX_SCOPES)
operation_label = BoundedLabel("operation", MAX_OPERATIONS)
signal_label = BoundedLabel("signal", MAX_SIGNALS)
host_label = BoundedLabel("host", MAX_HOSTS)
feed_label = BoundedLabel("feed", MAX_FEEDS)
#: The bounded label behind each label name a default series may carry (see add_default_series).
DEFAULT_LABELS = {"plan": plan_label, "signal": signal_label, "host": host_label, "feed": feed_label}

decisions = Counter(
    "quota_decisions",
    "Quota decisions by plan, view scope, outcome and reason (reason 'local': refused from process memory).",
    ["plan", "scope", "outcome", "reason"],
)
# Its observations arrive a fold's batch at a time (quotas/metrics_fold.py); shown as a histogram.
decision_seconds = BatchHistogram(
    "quota_decision_seconds", "Time QuotaThrottle spent deciding a request, by outcome.", ["outcome"], DECISION_BUCKETS
)
REGISTRY.register(decision_seconds)
redis_errors = Counter("quota_redis_errors", "Redis errors met by the quota engine, by operation.", ["operation"])
engine_mode = Gauge(
    "quota_engine_mode",
    "1 for the mode the engine is in (normal, fallback, open, closed); across processes, 1 if any live one is.",
    ["mode"],
    multiprocess_mode="livemax",
)
rules_load_failures = Counter(
    "quota_rules_load_failures",
    "Failed reloads of the rules snapshot (the database failed); the last good one is served.",
)
rules_stale = Gauge(
    "quota_rules_snapshot_stale",
    "1 while a process serves its last good rules snapshot because reloading it fails; 1 if any live one does.",
    multiprocess_mode="livemax",
)
adaptive_multiplier = Gauge(
    "quota_adaptive_multiplier",
    "The adaptive multiplier applied to each plan's rate limits (1 = nominal).",
    ["plan"],
    multiprocess_mode="mostrecent",
)
adaptive_computed_multiplier = Gauge(
    "quota_adaptive_computed_multiplier",
    "The adaptive multiplier the controller computes for each plan; applied only in ADAPTIVE['MODE'] 'enforce'.",
    ["plan"],
    multiprocess_mode="mostrecent",
)
load_signal = Gauge(
    "quota_load_signal",
    "Load signals the adaptive controller reads, per signal and host.",
    ["signal", "host"],
    multiprocess_mode="mostrecent",
)
# Both are computed at each scrape by a provider of the app that owns the data (add_default_series): the
# usage app's flush mark in Redis, the plans app's ban records. No process sets them, and they are kept out of
# the registry: a gauge without labels there always shows a sample (0), which would hide the computed one.
usage_flush_lag = Gauge(
    "quota_usage_flush_lag_seconds",
    "Seconds since the last completed usage flush started: usage counted since then may not be in the database "
    "yet (grows while flushes fail or stop).",
    registry=None,
)
active_bans = Gauge(
    "quota_active_bans", "Clients banned right now (ban records neither expired nor lifted).", registry=None
)
# The allow and deny list feeds of the plans app, per enabled feed, computed from their rows at each scrape.
acl_feed_age = Gauge(
    "quota_acl_feed_age_seconds",
    "Seconds since each enabled allow or deny list feed was last fetched and parsed successfully (+Inf: never).",
    ["feed"],
    registry=None,
)
acl_feed_failures = Gauge(
    "quota_acl_feed_failures",
    "Failed fetches in a row of each enabled feed (0 once one succeeds); its last good list stays in force.",
    ["feed"],
    registry=None,
)
acl_feed_entries = Gauge(
    "quota_acl_feed_entries", "Networks of each enabled feed's last good list, in force now.", ["feed"], registry=None
)
FAILED_AUTH_OUTCOMES = ("counted", "refused", "local", "unchecked")
failed_auth = Counter(
    "quota_failed_authentications",
    "Failed authentications (bad API keys, wrong passwords) per address or username: counted, refused (over "
    "QUOTAS['FAILED_AUTH_LIMITS']), local (Redis unreachable: counted in this process, against its "
    "LOCAL_SHARE of the limit) or unchecked (Redis unreachable: the block was not asked of it).",
    ["outcome"],
)
usage_write_lag = Histogram(
    "quota_usage_write_lag_seconds",
    "For each batch of usage counted in a process (requests served from local allowances, refusals answered "
    "from memory, the local fallback), how long its oldest request waited before the batch reached Redis.",
    buckets=(0.1, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0, 5.0, 10.0, 30.0, 60.0),
)
#: Why a refusal was not kept in the last-refusals store (quotas/observability/refusals.py).
REFUSAL_RECORD_LOSSES = ("capped", "dropped", "anonymous_cap")
refusal_records_lost = Counter(
    "quota_refusal_records_lost",
    "Refusals not kept in the last-refusals store: capped (their client already had a record that second), "
    "dropped (the process's buffer was full while Redis could not be written) or anonymous_cap (the process "
    "recorded QUOTAS['REFUSALS_ANONYMOUS_PER_HOUR'] anonymous clients this hour already).",
    ["reason"],
)
owed_spend_dropped = Counter(
    "quota_owed_spend_dropped_micros",
    "Budget spend (micro-units) a process admitted or settled while Redis was away and could not charge to "
    "Redis afterwards: its ledger was full, the script refused the client's keys, or it exited still unable.",
)
#: Why a client's country could not be looked up (quotas/identity/countries.py).
COUNTRY_UNAVAILABLE_REASONS = ("unset", "not_installed", "unreadable")
country_limits_skipped = Counter(
    "quota_country_limits_skipped",
    "Requests matched by a limit kept to some countries that could not tell the client's country, so the limit "
    "did not apply: QUOTAS['GEOIP_COUNTRY_DB'] unset, geoip2 not installed, or the database unreadable.",
    ["reason"],
)

# (plan, scope, outcome, reason) -> (counter child, histogram child). Bounded: its keys are bounded labels.
_decision_children: dict[tuple[str, str, str, str], tuple[Counter, BatchChild]] = {}
_warned: set[tuple[str, str]] = set()
#: Unknown label values warned about at most, so a caller's bug cannot grow _warned without end.
_WARNED_MAX = 100
# The same children keyed by the caller's raw values, so a decision skips the label checks. Bounded: only
# admitted values get in (None and "" both stand for "none"), and the cap is a guard should that change.
_raw_children: dict[tuple[str | None, str | None, str, str], tuple[Counter, BatchChild]] = {}
_MAX_RAW_CHILDREN = 4 * (MAX_PLANS + 1) * (MAX_SCOPES + 1) * len(OUTCOMES) * len(REASONS)


def _checked(kind: str, value: str, allowed: Iterable[str]) -> str:
    """``value`` if it is one of ``allowed``, else ``other`` (warned about once per value: a caller's bug)."""
    if value in allowed:
        return value
    if (kind, value) not in _warned and len(_warned) < _WARNED_MAX:
        _warned.add((kind, value))
        logger.warning("quotas.metrics: unknown %s %r counted as %r", kind, value, OTHER)
    label_overflow.labels(kind).inc()
    return OTHER


def observe_decision(plan: str | None, scope: str | None, outcome: str, reason: str, *seconds: float) -> None:
    """Count one decision per duration in ``seconds`` (several: the ledger folding decisions of the same labels).

    ``plan`` is the plan's slug (None: no plan), ``scope`` the view's
    ``quota_scope`` (None or "": none), ``outcome`` one of :data:`OUTCOMES`
    and ``reason`` one of :data:`REASONS` (``none`` when allowed).
    """
    children = _raw_children.get((plan, scope, outcome, reason))
    if children is None:
        children = _children_for(plan, scope, outcome, reason)
        if (plan, scope, outcome, reason) not in _raw_children:  # each decision counts in the overflow metric
            for _ in seconds[1:]:
                _children_for(plan, scope, outcome, reason)
    counter, histogram = children
    counter.inc(len(seconds))
    histogram.observe_all(seconds)


def _children_for(plan: str | None, scope: str | None, outcome: str, reason: str) -> tuple[Counter, BatchChild]:
    """The labelled children of one decision, remembered under the caller's own values when they are admitted."""
    raw = (plan, scope, outcome, reason)
    if outcome not in OUTCOMES:
        outcome = _checked("outcome", outcome, OUTCOMES)
    if reason not in REASONS:
        reason = _checked("reason", reason, REASONS)
    key = (plan_label(plan), scope_label(scope), outcome, reason)
    children = _decision_children.get(key)
    if children is None:
        children = _decision_children.setdefault(key, (decisions.labels(*key), decision_seconds.labels(outcome)))
    # Only admitted values are remembered raw: every use of a value counted as "other" must still count in
    # quota_metrics_label_overflow_total, and admitted values are bounded.
    admitted = raw[2] in OUTCOMES and raw[3] in REASONS and plan_label.admits(plan) and scope_label.admits(scope)
    if admitted and len(_raw_children) < _MAX_RAW_CHILDREN:
        _raw_children[raw] = children
    return children


def observe_failed_auth(outcome: str) -> None:
    """Count one failed authentication's outcome (one of :data:`FAILED_AUTH_OUTCOMES`), per address or username."""
    failed_auth.labels(_checked("outcome", outcome, FAILED_AUTH_OUTCOMES)).inc()


def observe_usage_write_lag(seconds: float) -> None:
    """Record how long the oldest request of a batch of in-process usage waited for the batch to reach Redis."""
    usage_write_lag.observe(seconds)


def observe_country_limits_skipped(reason: str) -> None:
    """Count one request whose country limits did not apply (one of :data:`COUNTRY_UNAVAILABLE_REASONS`)."""
    country_limits_skipped.labels(_checked("reason", reason, COUNTRY_UNAVAILABLE_REASONS)).inc()


def observe_redis_error(operation: str) -> None:
    """Count one Redis error met while doing ``operation`` (decide, refund, flush_usage, ...)."""
    redis_errors.labels(operation_label(operation)).inc()


def observe_refusal_record_lost(reason: str) -> None:
    """Count one refusal the last-refusals store did not keep (one of :data:`REFUSAL_RECORD_LOSSES`)."""
    refusal_records_lost.labels(_checked("reason", reason, REFUSAL_RECORD_LOSSES)).inc()


def set_engine_mode(mode: str) -> None:
    """Record the engine's current mode (one of :data:`ENGINE_MODES`): 1 for it, 0 for the others."""
    mode = _checked("mode", mode, ENGINE_MODES)
    for name in ENGINE_MODES:
        engine_mode.labels(name).set(1 if name == mode else 0)


def observe_rules_load_failure() -> None:
    """Count one failed reload of the rules snapshot."""
    rules_load_failures.inc()


def set_rules_stale(stale: bool) -> None:
    """Record whether this process serves a stale rules snapshot."""
    rules_stale.set(1 if stale else 0)


def set_multiplier(plan: str | None, value: float) -> None:
    """Record the adaptive multiplier in force for ``plan`` (a slug)."""
    adaptive_multiplier.labels(plan_label(plan)).set(value)


def set_computed_multiplier(plan: str | None, value: float) -> None:
    """Record the adaptive multiplier the controller computes for ``plan`` (a slug), applied or not."""
    adaptive_computed_multiplier.labels(plan_label(plan)).set(value)


def set_load_signal(name: str, host: str, value: float) -> None:
    """Record one load signal (``cpu``, ``memory``, ``latency_p95`` ...) of one host."""
    load_signal.labels(signal_label(name), host_label(host)).set(value)


# Every contracted series exists before its first event: a dashboard or alert on them sees 0, not nothing.
for _operation in REDIS_OPERATIONS:
    redis_errors.labels(operation_label(_operation))
for _outcome in FAILED_AUTH_OUTCOMES:
    failed_auth.labels(_outcome)
for _loss in REFUSAL_RECORD_LOSSES:
    refusal_records_lost.labels(_loss)
set_engine_mode("normal")
set_rules_stale(False)
