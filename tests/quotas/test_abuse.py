"""Abuse protection in the engine: escalation bans and concurrency leases."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time

import pytest

from quotas.rates import parse_rates
from quotas.rules import LimitRule, ban_policy_spec

T0 = 1_700_000_040.0
POLICY = ban_policy_spec(3, 10, (60, 600))


def windows(algorithm="fixed_window", rates="1/min", **kwargs):
    return LimitRule(id="l", name="l", rates=parse_rates(rates), algorithm=algorithm, **kwargs).windows


def refuse_until_banned(engine, at, tag="{c}"):
    results = [engine.decide(tag, windows(), now=at, ban_policy=POLICY) for _ in range(4)]
    return results[-1]


def test_repeated_refusals_ban_the_client(engine):
    """More than 3 refusals within 10 s: banned for 60 s, refused without reading the limits."""
    assert engine.decide("{c}", windows(), now=T0, ban_policy=POLICY).allowed
    last = refuse_until_banned(engine, T0 + 1)
    assert last.ban_started
    assert last.retry_after == 60
    banned = engine.decide("{c}", windows(), now=T0 + 2, ban_policy=POLICY)
    assert banned.banned
    assert banned.states == []
    assert banned.retry_after == 59


def test_bans_expire_on_their_own(engine):
    engine.decide("{c}", windows(), now=T0, ban_policy=POLICY)
    refuse_until_banned(engine, T0 + 1)
    assert engine.decide("{c}", windows(), now=T0 + 61, ban_policy=POLICY).allowed  # a new minute, ban over


def test_bans_grow_on_repeat_and_are_forgotten_after_a_day(engine):
    engine.decide("{c}", windows(), now=T0, ban_policy=POLICY)
    assert refuse_until_banned(engine, T0 + 1).retry_after == 60
    engine.decide("{c}", windows(), now=T0 + 120, ban_policy=POLICY)
    assert refuse_until_banned(engine, T0 + 121).retry_after == 600  # second strike
    later = T0 + 2 * 86400
    engine.decide("{c}", windows(), now=later, ban_policy=POLICY)
    assert refuse_until_banned(engine, later + 1).retry_after == 60  # strikes forgotten


def test_few_refusals_do_not_ban(engine):
    engine.decide("{c}", windows(), now=T0, ban_policy=POLICY)
    results = [engine.decide("{c}", windows(), now=T0 + 1 + i * 4, ban_policy=POLICY) for i in range(5)]
    assert not any(r.ban_started or r.banned for r in results)  # never more than 3 within 10 s


def test_without_a_policy_nobody_is_banned(engine):
    results = [engine.decide("{c}", windows(), now=T0) for _ in range(50)]
    assert not any(r.ban_started or r.banned for r in results)


def test_concurrency_lease_is_taken_and_released(engine):
    """At most 2 requests in flight; finishing one frees its slot."""
    cc = windows("concurrency", "2/30s")
    first = engine.decide("{c}", cc, request_id="r1", now=T0)
    second = engine.decide("{c}", cc, request_id="r2", now=T0)
    third = engine.decide("{c}", cc, request_id="r3", now=T0)
    assert (first.allowed, second.allowed, third.allowed) == (True, True, False)
    engine.release(first)
    assert engine.decide("{c}", cc, request_id="r4", now=T0 + 1).allowed


def test_concurrency_lease_runs_out(engine):
    cc = windows("concurrency", "1/30s")
    engine.decide("{c}", cc, request_id="r1", now=T0)
    assert not engine.decide("{c}", cc, request_id="r2", now=T0 + 29).allowed
    assert engine.decide("{c}", cc, request_id="r3", now=T0 + 30.001).allowed


def _hold_lease_then_hang(ready):
    from quotas.engine import get_engine

    decision = get_engine().decide("{dying}", windows("concurrency", "1/2s"), request_id="worker-1")
    ready.send(decision.allowed)
    time.sleep(60)  # killed long before this ends


@pytest.mark.slow
def test_a_killed_worker_gives_its_slot_back_after_the_lease(engine):
    """A worker killed mid-request never releases; its lease is reclaimed when it runs out."""
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    worker = ctx.Process(target=_hold_lease_then_hang, args=(child,))
    worker.start()
    try:
        assert parent.recv() is True
        os.kill(worker.pid, signal.SIGKILL)
        worker.join(timeout=10)
        cc = windows("concurrency", "1/2s")
        assert not engine.decide("{dying}", cc, request_id="next").allowed
        deadline = time.monotonic() + 5
        while not engine.decide("{dying}", cc, request_id="next").allowed:
            assert time.monotonic() < deadline, "the dead worker's lease was never reclaimed"
            time.sleep(0.1)
    finally:
        if worker.is_alive():
            worker.kill()
