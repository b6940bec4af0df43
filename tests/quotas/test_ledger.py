"""The ledger (quotas/observability/ledger.py): a decision's metrics and history note are one append on the
request path, counted exactly before anything reads them."""

from __future__ import annotations

import gc
import threading
import time

from prometheus_client import REGISTRY

from quotas import metrics
from quotas.metrics_exposition import exposition
from quotas.metrics_fold import fold
from quotas.observability import record as record_module
from quotas.observability.history import History
from quotas.observability.ledger import LEDGER, Ledger
from quotas.observability.record import record_decision
from quotas.store.decision import Decision

PLAN, SCOPE = "ledger", "ledger"
LABELS = {"plan": PLAN, "scope": SCOPE, "outcome": "allowed", "reason": "none"}
# Admitted at collection, before any test runs: a process admits only its first MAX_PLANS plans and MAX_SCOPES
# scopes as labels of their own, and a value once admitted stays so.
metrics.plan_label(PLAN)
metrics.scope_label(SCOPE)


def decisions_total(labels: dict[str, str] = LABELS) -> float:
    return REGISTRY.get_sample_value("quota_decisions_total", labels) or 0.0


def recorded(n: int, history: History | None = None, *, tag: str = "{s.7}", scope: str = SCOPE,
             took: float = 0.0) -> None:  # fmt: skip
    """``n`` admitted decisions through record_decision, each ``took`` seconds since its start (at least)."""
    for _ in range(n):
        decision = Decision(allowed=True, states=[], now=time.time())
        record_decision(
            None, decision, client_tag=tag, plan=PLAN, scope=scope, started=time.perf_counter() - took,
            history=history,
        )  # fmt: skip


class Written:
    """A history store that keeps what it was given."""

    def __init__(self) -> None:
        self.counts: dict[tuple[int, str], int] = {}

    def write(self, counts, top, clients) -> None:
        self.counts.update(counts)


def test_the_request_path_takes_no_lock_and_touches_no_metric_before_a_read():
    """With the ledger's fold lock held (a fold under way), decisions still go through, and the counter
    child is unchanged until the registry is read, which then shows every one of them."""
    before = decisions_total()
    child = metrics.decisions.labels(PLAN, SCOPE, "allowed", "none")
    with LEDGER._lock:
        recorded(3)
        assert len(LEDGER) >= 3
        assert child._value.get() == before
    assert decisions_total() == before + 3  # the registry's collection folded first
    assert len(LEDGER) == 0


def test_the_exposition_folds_first():
    """/metrics' body counts decisions recorded just before it."""
    before = decisions_total()
    recorded(2)
    body = exposition()[0].decode()
    line = next(s for s in body.splitlines() if s.startswith("quota_decisions_total{") and f'scope="{SCOPE}"' in s)
    assert float(line.rsplit(" ", 1)[1]) == before + 2


def test_durations_are_observed_as_one_by_one():
    """Each folded decision lands in its duration's bucket and adds its duration to the sum."""
    labels = {"outcome": "allowed", "le": "0.1"}
    below = {"outcome": "allowed", "le": "0.005"}
    fold()
    bucket, lower = (REGISTRY.get_sample_value("quota_decision_seconds_bucket", x) for x in (labels, below))
    total = REGISTRY.get_sample_value("quota_decision_seconds_sum", {"outcome": "allowed"})
    recorded(4, took=0.006)
    assert REGISTRY.get_sample_value("quota_decision_seconds_bucket", labels) == bucket + 4
    assert REGISTRY.get_sample_value("quota_decision_seconds_bucket", below) == lower
    assert REGISTRY.get_sample_value("quota_decision_seconds_sum", {"outcome": "allowed"}) >= total + 4 * 0.006


def test_the_history_folds_before_it_is_read_or_written():
    """pending() and write() count the decisions the ledger holds for this history, each in its minute."""
    history = History()
    recorded(2, history)
    assert history.pending() == 2
    recorded(1, history, tag="{u.9}")
    store = Written()
    history.write(store)  # type: ignore[arg-type]
    assert sum(store.counts.values()) == 3
    assert {field for _, field in store.counts} == {f"{PLAN}|{SCOPE}|a"}
    assert history.pending() == 0


def test_a_history_dropped_before_its_fold_loses_only_its_notes():
    """The notes of a history gone (a runtime reset) are dropped with it; the metrics still count them."""
    before = decisions_total()
    history = History()
    recorded(2, history)
    del history
    gc.collect()
    assert decisions_total() == before + 2


def test_past_the_bound_the_request_path_folds(monkeypatch):
    """With nothing folding (the poller dead or off), the ledger is folded by the request that reaches
    FOLD_AT entries: it never grows without end."""
    fold()
    monkeypatch.setattr(record_module, "FOLD_AT", 5)
    history = History()
    with LEDGER._lock:  # nothing folds meanwhile (a poller's tick waits)
        recorded(4, history)
        assert len(LEDGER) == 4
    recorded(1, history)
    assert len(LEDGER) == 0
    assert sum(history._counts.values()) == 5


def test_decisions_recorded_while_folds_run_are_each_counted_once():
    """Four request threads and a thread folding all the while: every decision counted once."""
    history = History()
    before = decisions_total()
    done = threading.Event()

    def fold_all_the_while() -> None:
        while not done.is_set():
            LEDGER.fold()

    folder = threading.Thread(target=fold_all_the_while)
    folder.start()
    threads = [threading.Thread(target=recorded, args=(500, history)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    done.set()
    folder.join()
    assert decisions_total() == before + 2000
    assert history.pending() == 2000


def test_each_decision_of_a_value_counted_as_other_counts_in_the_overflow():
    """Folded together, three decisions of an unsafe scope still count three label overflows, as three
    calls of observe_decision did."""
    overflow = {"label": "scope"}
    before = REGISTRY.get_sample_value("quota_metrics_label_overflow_total", overflow) or 0.0
    recorded(3, scope="not a safe label!")
    assert REGISTRY.get_sample_value("quota_metrics_label_overflow_total", overflow) == before + 3


def test_a_forked_child_leaves_the_parents_entries_to_the_parent():
    """After a fork the child's ledger starts empty (the parent counts what it recorded) with a free lock."""
    ledger = Ledger()
    ledger.entries.append(("p", "s", "allowed", "none", 0.001, "{s.1}", 0.0, 0))
    ledger._lock.acquire()  # held by a thread of the parent when it forked
    ledger.forked()
    assert len(ledger) == 0
    ledger.fold()  # does not wait for a thread the child does not have
