"""The five algorithms, driven with explicit time, on every store (part of the behaviour suite)."""

from __future__ import annotations

import struct

import pytest

from quotas.formats.rates import parse_rates
from quotas.rules.limits import LimitRule
from quotas.store.decision import DecideCall
from quotas.store.replies import noted_windows
from tests.store_client import client_of

T0 = 1_700_000_040.0  # aligned to a minute and to 10 seconds


def rule(algorithm: str, rates: str, **kwargs) -> LimitRule:
    return LimitRule(id=kwargs.pop("id", "l1"), name=kwargs.pop("name", "test"), rates=parse_rates(rates),
                     algorithm=algorithm, **kwargs)  # fmt: skip


def admitted(runtime, windows, times, tag="{c}", weight=None) -> list[bool]:
    return [runtime.guard.decide(tag, windows, weight=weight, now=t).allowed for t in times]


ALL = ["fixed_window", "sliding_window_log", "sliding_window_counter", "token_bucket", "leaky_bucket"]


@pytest.mark.parametrize("algorithm", ALL)
def test_limit_is_enforced_then_refused(runtime, algorithm):
    """Every algorithm admits exactly `limit` requests at one instant, then refuses."""
    windows = rule(algorithm, "5/10s").windows
    assert admitted(runtime, windows, [T0] * 7) == [True] * 5 + [False] * 2


@pytest.mark.parametrize("algorithm", ALL)
def test_denied_request_reports_exact_retry_and_is_admitted_then(runtime, algorithm):
    """Retry-After is the smallest whole second after which the request is admitted."""
    windows = rule(algorithm, "5/10s").windows
    admitted(runtime, windows, [T0] * 5)
    denied = runtime.guard.decide("{c}", windows, now=T0 + 0.5)
    assert not denied.allowed
    retry = denied.retry_after
    assert retry >= 1
    assert not runtime.guard.decide("{c}", windows, now=T0 + 0.5 + retry - 1).allowed
    assert runtime.guard.decide("{c}", windows, now=T0 + 0.5 + retry).allowed


def test_fixed_window_resets_at_the_aligned_boundary(runtime):
    """A fixed window refuses until its aligned end, and admits a full quota after."""
    windows = rule("fixed_window", "3/10s").windows
    assert admitted(runtime, windows, [T0 + 1, T0 + 2, T0 + 3, T0 + 9.9]) == [True, True, True, False]
    decision = runtime.guard.decide("{c}", windows, now=T0 + 4)
    assert decision.states[0].retry_us == 6_000_000
    assert decision.retry_after == 6
    assert admitted(runtime, windows, [T0 + 10] * 4) == [True, True, True, False]


def test_fixed_window_allows_double_at_the_boundary_as_documented(runtime):
    """The known weakness: 2x the limit across a boundary (why the other algorithms exist)."""
    windows = rule("fixed_window", "3/10s").windows
    assert admitted(runtime, windows, [T0 + 9.9] * 3 + [T0 + 10] * 3) == [True] * 6


def test_sliding_log_is_exact_over_any_interval(runtime):
    """At most `limit` in any interval of length `window`; units leave one by one."""
    windows = rule("sliding_window_log", "3/10s").windows
    assert admitted(runtime, windows, [T0, T0 + 1, T0 + 2]) == [True] * 3
    denied = runtime.guard.decide("{c}", windows, now=T0 + 3)
    assert denied.states[0].retry_us == 7_000_000  # the unit from T0 leaves at T0 + 10
    assert admitted(runtime, windows, [T0 + 9.999999, T0 + 10, T0 + 10]) == [False, True, False]
    assert admitted(runtime, windows, [T0 + 11]) == [True]


def test_sliding_log_does_not_log_denied_requests(runtime):
    """A flood of refused requests cannot grow the log past `limit` members."""
    windows = rule("sliding_window_log", "3/min").windows
    admitted(runtime, windows, [T0] * 500)
    key = next(iter(client_of(runtime).scan_iter(match="*")))
    assert client_of(runtime).zcard(key) == 3


def test_sliding_log_retry_with_weight_waits_for_enough_units(runtime):
    """A request of weight 2 waits until two units have left the window."""
    windows = rule("sliding_window_log", "3/10s").windows
    admitted(runtime, windows, [T0, T0 + 2, T0 + 4])
    decision = runtime.guard.decide("{c}", windows, weight=2, now=T0 + 5)
    assert decision.states[0].retry_us == 7_000_000  # T0 + 2 + 10 - (T0 + 5)


def test_sliding_counter_weights_the_previous_window(runtime):
    """estimate = previous * (1 - elapsed/window) + current."""
    windows = rule("sliding_window_counter", "10/10s").windows
    assert admitted(runtime, windows, [T0 + 5] * 10) == [True] * 10
    # 3 s into the next window: 10 * 0.7 = 7 still count, so 3 more fit.
    assert admitted(runtime, windows, [T0 + 13] * 4) == [True, True, True, False]
    # Halfway: 10 * 0.5 + 3 = 8, so 2 more fit.
    assert admitted(runtime, windows, [T0 + 15] * 3) == [True, True, False]


def test_sliding_counter_error_bound(runtime):
    """Documented bound: never more than `limit` per aligned window, nor 2x in any window.

    Steady traffic (one request every 0.25 s for 60 s against 10/10s) is
    admitted within 10 % of the exact rate.
    """
    windows = rule("sliding_window_counter", "10/10s").windows
    times = [T0 + i * 0.25 for i in range(240)]
    results = admitted(runtime, windows, times)
    accepted = [t for t, ok in zip(times, results, strict=True) if ok]
    for start in range(int(T0), int(T0) + 60, 10):
        assert sum(start <= t < start + 10 for t in accepted) <= 10
    for t in accepted:
        assert sum(t - 10 < u <= t for u in accepted) <= 20
    assert 54 <= len(accepted) <= 66


def test_token_bucket_burst_then_refill(runtime):
    """Capacity = burst; tokens come back at `rate`."""
    windows = rule("token_bucket", "1/s", burst=5).windows
    assert admitted(runtime, windows, [T0] * 6) == [True] * 5 + [False]
    assert admitted(runtime, windows, [T0 + 1, T0 + 1]) == [True, False]
    assert admitted(runtime, windows, [T0 + 10] * 6) == [True] * 5 + [False]


def test_token_bucket_keeps_one_value_per_window(runtime):
    """GCRA: the state is a single timestamp, one field of the client's bucket hash."""
    windows = rule("token_bucket", "10/s").windows
    admitted(runtime, windows, [T0] * 3)
    (key,) = list(client_of(runtime).scan_iter(match="*"))
    assert client_of(runtime).type(key) == b"hash"
    field = f"c|{windows[0].state_field}"
    # The window's value, the client's expiry, and the bucket's expiry.
    assert sorted(client_of(runtime).hkeys(key)) == sorted([field.encode(), b"c|~", b"~"])
    (tat,) = struct.unpack("<d", client_of(runtime).hget(key, field))  # 8 bytes: a double
    assert tat == pytest.approx((T0 + 0.3) * 1e6)


def test_client_hash_ttl_is_never_shortened(runtime):
    """A short window's write keeps the TTL a day window of the same client needs (the bucket's TTL)."""
    day = rule("fixed_window", "5/day", id="day").windows
    second = rule("token_bucket", "5/s", id="sec").windows
    # At T0 (22:14 UTC) the day window has 1 h 46 min left: the real clock could be minutes before midnight.
    runtime.guard.decide("{c}", day, now=T0)
    runtime.guard.decide("{c}", second, now=T0)
    (key,) = list(client_of(runtime).scan_iter(match="*"))
    assert client_of(runtime).pttl(key) > 3_600_000


def test_a_sliding_logs_ttl_is_never_shortened_below_an_allowances_units(runtime):
    """An allowance's units are recorded at its end (now + 0.25 s here): a request admitted just after it, whose
    unit is recorded now, must not shorten the log's TTL to its own second, or the log vanishes while the
    allowance's units still count and a second admits more than the limit (the eight-process race saw 32 of 30
    when the window then stayed full: nothing later lengthened it again)."""
    windows = rule("sliding_window_log", "30/s").windows
    grant = DecideCall("{c}", windows, now=T0, allowance_ok=True)
    grant.allowance = (5, 1.0, 250_000)  # 5 requests' units, usable for 0.25 s
    assert runtime.guard.store.decide(grant).granted == 5
    assert runtime.guard.decide("{c}", windows, now=T0 + 0.01).allowed
    (key,) = list(client_of(runtime).scan_iter(match="*"))
    # The allowance's units leave the window at T0 + 1.25: 1.24 s after the second request.
    assert client_of(runtime).pttl(key) > 1_200


def test_leaky_bucket_policing_refuses_excess(runtime):
    """Without max_delay, excess over the bucket is refused at once."""
    windows = rule("leaky_bucket", "2/s", burst=2).windows
    decisions = [runtime.guard.decide("{c}", windows, now=T0) for _ in range(3)]
    assert [d.allowed for d in decisions] == [True, True, False]
    assert all(d.delay == 0 for d in decisions)


def test_leaky_bucket_shaping_delays_up_to_max_delay(runtime):
    """With max_delay, requests are spaced at the outflow rate, never held longer."""
    windows = rule("leaky_bucket", "10/s", burst=100, max_delay=0.35).windows
    decisions = [runtime.guard.decide("{c}", windows, now=T0) for _ in range(6)]
    assert [d.allowed for d in decisions] == [True, True, True, True, False, False]
    assert [round(d.delay, 3) for d in decisions[:4]] == [0.0, 0.1, 0.2, 0.3]
    assert decisions[4].retry_after == 1  # 0.4 s of queue - 0.35 s allowed -> 0.05 s -> 1 s
    later = runtime.guard.decide("{c}", windows, now=T0 + 0.1)
    assert later.allowed
    assert round(later.delay, 3) == 0.3


def test_several_windows_of_one_limit_each_count(runtime):
    """'3/s; 5/10s': the per-second and per-10-second windows both apply."""
    windows = rule("fixed_window", "3/s; 5/10s").windows
    assert len(windows) == 2
    assert admitted(runtime, windows, [T0] * 4) == [True, True, True, False]
    assert admitted(runtime, windows, [T0 + 1] * 3) == [True, True, False]


def test_all_or_nothing_across_limits(runtime):
    """When one limit denies, nothing is consumed from the others."""
    wide = rule("fixed_window", "100/min", id="wide").windows
    narrow = rule("sliding_window_log", "2/min", id="narrow").windows
    both = wide + narrow
    assert admitted(runtime, both, [T0] * 5) == [True, True, False, False, False]
    wide_alone = runtime.guard.decide("{c}", wide, now=T0)
    assert wide_alone.states[0].remaining == 100 - 3  # 2 from before + this one


def test_weight_spends_several_units(runtime):
    """A request of weight 4 spends 4 units in every window it matches."""
    windows = rule("fixed_window", "10/min").windows
    assert admitted(runtime, windows, [T0] * 3, weight=4) == [True, True, False]
    assert runtime.guard.decide("{c}", windows, weight=2, now=T0).allowed


@pytest.mark.parametrize("algorithm", ALL)
def test_weight_beyond_capacity_never_fits(runtime, algorithm):
    """A request heavier than the limit is refused with the window as its wait."""
    windows = rule(algorithm, "5/min").windows
    decision = runtime.guard.decide("{c}", windows, weight=6, now=T0)
    assert not decision.allowed
    assert decision.states[0].retry_us is None
    assert decision.retry_after == 60


def test_shadow_limit_records_but_never_blocks(runtime):
    """A shadow window reports would-deny and lets the request through."""
    windows = rule("fixed_window", "2/min", shadow=True).windows
    decisions = [runtime.guard.decide("{c}", windows, now=T0) for _ in range(4)]
    assert all(d.allowed for d in decisions)
    assert [bool(d.would_deny()) for d in decisions] == [False, False, True, True]


def test_clients_are_independent(runtime):
    """Two clients never share a window."""
    windows = rule("fixed_window", "1/min").windows
    assert runtime.guard.decide("{a}", windows, now=T0).allowed
    assert runtime.guard.decide("{b}", windows, now=T0).allowed
    assert not runtime.guard.decide("{a}", windows, now=T0).allowed


def test_server_clock_is_used_without_now(runtime):
    """Without `now`, time comes from Redis TIME."""
    windows = rule("token_bucket", "5/min").windows
    decision = runtime.guard.decide("{c}", windows)
    server_seconds, server_micro = client_of(runtime).time()
    assert abs(decision.now - (server_seconds + server_micro / 1e6)) < 2


@pytest.mark.parametrize("algorithm", ALL)
def test_refund_gives_units_back(runtime, algorithm):
    """A refunded decision no longer counts."""
    windows = rule(algorithm, "2/min").windows
    first = runtime.guard.decide("{c}", windows, now=T0)
    assert runtime.guard.decide("{c}", windows, now=T0).allowed
    runtime.guard.settlement.refund(first, only_refundable=False)
    assert runtime.guard.decide("{c}", windows, now=T0).allowed
    assert not runtime.guard.decide("{c}", windows, now=T0).allowed


def test_changing_algorithm_uses_a_fresh_key(runtime):
    """Keys name the algorithm, so switching one never meets a value of the wrong type."""
    runtime.guard.decide("{c}", rule("sliding_window_log", "5/min").windows, now=T0)
    assert runtime.guard.decide("{c}", rule("fixed_window", "5/min").windows, now=T0).allowed


@pytest.mark.parametrize("algorithm", [*ALL, "period_quota"])
def test_only_the_windows_a_decision_notes_reply_a_delay_or_an_alert(runtime, algorithm):
    """A decision's notes read the delay and alert slots of :func:`noted_windows` alone: every other window's reply
    holds 0 there, admitted or refused, on every store (a leaky bucket that shapes and a period are noted)."""
    plain = rule(algorithm, "3/10s" if algorithm in ALL else "3/day", id="p", name="plain",
                 period="" if algorithm in ALL else "day").windows  # fmt: skip
    noted = rule("leaky_bucket", "10/s", id="s", name="shaped", burst=1, max_delay=5.0).windows
    windows = (*plain, *noted)
    assert noted_windows(windows) == ((len(windows) - 1,) if algorithm in ALL else (0, len(windows) - 1))
    decisions = [runtime.guard.decide("{n}", windows, now=T0) for _ in range(5)]
    assert not decisions[-1].allowed  # refusals too
    assert any(d.states[-1].delay_us for d in decisions)  # the shaped window does reply a delay
    for decision in decisions:
        for index, state in enumerate(decision.states):
            if index not in noted_windows(windows):
                assert (state.delay_us, state.alert) == (0, 0), (index, state)
