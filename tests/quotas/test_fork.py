"""A process forked from one that has decided (gunicorn with ``--preload``, multiprocessing): the child decides
with a runtime of its own, never with what its parent holds (real Redis), and takes the process-wide locks anew."""

from __future__ import annotations

import contextlib
import multiprocessing
import threading
from collections.abc import Iterator

import pytest

from quotas import metrics
from quotas.engine import default_engine
from quotas.formats.rates import parse_rates
from quotas.identity import countries
from quotas.rules.limits import LimitRule
from quotas.store.backends.memory import client as memory_client
from quotas.store.decision import DecideCall

LIMIT = 20


@pytest.fixture
def busy(set_quotas):
    """Allowances for a client sending 2 requests within 0.1 s, up to 10 requests each."""
    set_quotas("ALLOWANCES", ENABLED=True, MIN_RATE=15, HORIZON=60.0, SHARE=0.5, MAX_REQUESTS=10)


WINDOWS = LimitRule(id="f", name="f", rates=parse_rates(f"{LIMIT}/hour"), algorithm="fixed_window").windows


def ask():
    return default_engine.runtime().guard.decide_call(DecideCall("{forked}", WINDOWS, allowance_ok=True))


def _admitted_in_child(pipe):
    pipe.send(sum(ask().allowed for _ in range(2 * LIMIT)))


def _exit_in_child(runtime, pipe):
    # What the interpreter's exit runs in a gunicorn worker forked after its master decided: the exit work of the
    # runtime the child inherited (registered with atexit by the parent).
    runtime.at_exit()
    pipe.send(True)


def _in_child(target, *args):
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    process = ctx.Process(target=target, args=(*args, child))
    process.start()
    answer = parent.recv() if parent.poll(30) else None
    process.join(timeout=10)
    if process.is_alive():  # a child stuck on a lock: not left behind
        process.kill()
        process.join()
    assert process.exitcode == 0
    return answer


@contextlib.contextmanager
def held_by_a_thread(lock) -> Iterator[None]:
    """``lock`` (the product's own) held by another thread of this process, as one of its threads would."""
    held, release = threading.Event(), threading.Event()

    def hold():
        with lock:
            held.set()
            release.wait(30)

    thread = threading.Thread(target=hold)
    thread.start()
    held.wait(5)
    try:
        yield
    finally:
        release.set()
        thread.join()


def _with_an_allowance() -> int:
    admitted = 0
    while True:
        decision = ask()
        admitted += decision.allowed
        if decision.granted > 1:
            return admitted


@pytest.mark.redis
def test_a_forked_child_never_serves_its_parents_allowance(busy, redis_client):
    """The parent holds units reserved in Redis for its own requests; a child serving them too would admit
    more than the limit between them."""
    admitted = _with_an_allowance()
    admitted += _in_child(_admitted_in_child)
    admitted += sum(ask().allowed for _ in range(2 * LIMIT))
    assert admitted == LIMIT


@pytest.mark.redis
def test_a_forked_childs_exit_gives_back_nothing_its_parent_holds(busy, redis_client):
    """The parent's unused units go back once, by the parent: given back by a child at its exit as well, the
    window would count fewer requests than were admitted."""
    admitted = _with_an_allowance()
    assert _in_child(_exit_in_child, default_engine.runtime())
    admitted += sum(ask().allowed for _ in range(2 * LIMIT))
    assert admitted == LIMIT


@pytest.mark.redis
def test_a_child_forked_while_a_parents_thread_holds_a_lock_still_decides(busy, redis_client):
    """A lock of the runtime a parent's thread held at the fork is never released in the child: the child must
    not need it."""
    _with_an_allowance()
    # The parent's poller ending allowances, say, at the moment of the fork.
    with held_by_a_thread(default_engine.runtime().guard.allowances._lock):
        assert _in_child(_admitted_in_child) is not None


def _label_in_child(pipe):
    # A value the parent never saw goes through the label's lock, whether it is admitted or counted as "other"
    # (the run's earlier tests may have filled the label's values).
    pipe.send(metrics.plan_label("forked-plan") in {"forked-plan", metrics.OTHER})


def _country_database_in_child(pipe):
    # Not a database (or geoip2 not installed, the extra): opened, under the lock, and found unusable.
    pipe.send(countries.database().reader is None)


def _memory_keyspace_in_child(pipe):
    pipe.send(len(memory_client.keyspace("memory://forked-child").data))


@pytest.mark.parametrize(
    ("lock", "use", "answer"),
    [
        (lambda: metrics.plan_label._lock, _label_in_child, True),
        (lambda: countries._lock, _country_database_in_child, True),
        (lambda: memory_client._registry_lock, _memory_keyspace_in_child, 0),
    ],
    ids=["a-metrics-label", "the-country-database", "the-memory-stores-registry"],
)
def test_a_child_forked_while_a_parents_thread_holds_a_process_wide_lock_still_takes_it(
    lock, use, answer, set_quotas, tmp_path
):
    """The locks that outlive a request (a metrics label's first values, the country database's opening, the
    memory store's registry of keyspaces) are taken anew by a child forked while a parent's thread held them."""
    unopened = tmp_path / "countries.mmdb"  # a path this process never opened: the child must open it
    unopened.write_bytes(b"not a database")
    set_quotas(GEOIP_COUNTRY_DB=str(unopened))
    with held_by_a_thread(lock()):
        assert _in_child(use) == answer
