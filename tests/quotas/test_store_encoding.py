"""The store's kept encodings: what goes on the wire is byte for byte what packing every item would send."""

from __future__ import annotations

import pytest
from hiredis import pack_command

from quotas.contract.protocol import decide_args
from quotas.formats.rates import Rate, parse_rates
from quotas.rules.limits import LimitRule
from quotas.store.decision import DecideCall, WindowState, scaled

pytestmark = pytest.mark.redis


def _windows():
    """A rate of every kind of key: fields of the bucket, a sliding log (a key of its own), periods and budgets."""
    rules = [
        LimitRule(id="tb", name="tb", rates=parse_rates("5/s; 100/min"), algorithm="token_bucket"),
        LimitRule(id="log", name="log", rates=parse_rates("3/min"), algorithm="sliding_window_log"),
        LimitRule(id="day", name="day", rates=(Rate(4, 86400),), algorithm="period_requests", period="day"),
        LimitRule(id="eur", name="eur", rates=(Rate(5, 86400),), algorithm="budget", period="day", currency="EUR"),
    ]
    return [w for r in rules for w in r.windows]


CALLS = [
    DecideCall("{u.1}", _windows()[:2], usage="1|api"),
    DecideCall(
        "{u.2}", _windows(), 3, 1_700_000_040.5, 17, "", True, 0.5, "3 60000000 1,2", "req", True, (7, 0.1, 250)
    ),
    DecideCall("{k.~ab}", _windows()[:1], None, None, 2, "2|é", allowance=(2, 0.25, 250_000)),
]


@pytest.mark.parametrize("call", CALLS)
def test_a_decision_goes_out_as_hiredis_packs_it(runtime, call):
    """The encoded command equals hiredis's packing of the same KEYS and ARGV, as FCALL and as EVALSHA, the first
    time and from what the store kept, and the ARGV is decide_args's: with the engine's clock's time, which the
    tests inject (production's system clock leaves it to the Redis server's TIME)."""
    store = runtime.store
    at = runtime.clock.now() if call.now is None else call.now
    script = store.transport.script("decide")
    for _ in range(2):
        keys, args, _specs = store.encode(call)
        for functions in (True, False):
            packed = pack_command(script.command(list(keys), list(args), functions))
            # What LuaScript._send writes: the count of items, the command's head, then the kept encodings.
            head = b"*%d\r\n" % (3 + len(keys) + len(args))
            assert head + script._heads[functions] + keys.resp + args.resp == packed
    named = store.keys_of(call.tag)
    day = args[2]
    assert list(args) == decide_args(
        named.field_prefix, now=int(at * 1_000_000),
        weight="" if call.weight is None else call.weight, cost=call.cost_micros, usage=call.usage or "",
        mode="peek" if call.peek else "", multiplier="" if call.multiplier == 1.0 else repr(call.multiplier),
        ban_policy=call.ban_policy, request_id=call.request_id, day=day, day_offset=args[3], allowance=call.allowance,
        specs=[w.spec_at(at) for w in call.windows],
    )  # fmt: skip


@pytest.mark.parametrize("call", CALLS)
def test_a_decoded_state_has_every_field_set(runtime, call):
    """decode() makes each window's state without WindowState's __init__: every field is set, as it would set them
    (quota scaled by the multiplier for a rolling window)."""
    decision = runtime.store.decide(call)
    assert len(decision.states) == len(call.windows)
    for s in decision.states:
        fields = (s.window, s.ok, s.remaining, s.reset_us, s.retry_us, s.delay_us, s.used, s.alert, s.quota)
        assert s == WindowState(*fields)
        assert s.quota == scaled(s.window, call.multiplier)
