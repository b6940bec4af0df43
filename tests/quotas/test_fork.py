"""A process forked from one that has decided (gunicorn with ``--preload``, multiprocessing): the child decides
with a runtime of its own, never with what its parent holds (real Redis)."""

from __future__ import annotations

import multiprocessing
import threading

import pytest

from quotas.engine import default_engine
from quotas.formats.rates import parse_rates
from quotas.rules.limits import LimitRule
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
    assert process.exitcode == 0
    return answer


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
    runtime = default_engine.runtime()
    held, release = threading.Event(), threading.Event()

    def hold():
        # The parent's poller ending allowances, say, at the moment of the fork.
        with runtime.guard.allowances._lock:  # the product's own lock, held as its poller would
            held.set()
            release.wait(30)

    thread = threading.Thread(target=hold)
    thread.start()
    held.wait(5)
    try:
        assert _in_child(_admitted_in_child) is not None
    finally:
        release.set()
        thread.join()
