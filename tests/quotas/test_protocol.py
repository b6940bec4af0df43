"""quotas.contract.protocol owns the contract with the scripts: Lua and Python agree on every algorithm code."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from quotas.contract.keys import window_field
from quotas.contract.library import ENTRY_POINTS, PARTS, header, script_source, source
from quotas.contract.protocol import (
    ALGORITHM_CODES,
    DECIDE_FIXED_ARGS,
    SETTLEMENT_MEMORY,
    AdjustArg,
    Algorithm,
    DecideArg,
    DecideOption,
    HistoryTopArg,
    RefundArg,
    ReleaseArg,
    UsageAddArg,
    WindowSpec,
    adjust_args,
    decide_args,
    history_top_args,
    lua_constants,
    refund_args,
    release_args,
    usage_add_args,
)
from quotas.contract.reply_layout import (
    NEVER,
    REPLY_HEAD,
    REPLY_PER_WINDOW,
    AdjustedBudget,
    DecideFlag,
    DecideReply,
    WindowReply,
)
from quotas.settings import ALGORITHMS

#: The scripts run by Redis's own EVAL, the reference the memory store is held to.
pytestmark = pytest.mark.redis


def test_lua_sees_every_algorithm_code_python_sends(redis_client):
    """The generated constants, run by Redis itself, give each algorithm the code Python packs into specs."""
    names = [a.name for a in Algorithm]
    lua = lua_constants() + "return {" + ", ".join(names) + "}"
    assert redis_client.eval(lua, 0) == [int(a) for a in Algorithm]
    assert {a.name.lower(): int(a) for a in Algorithm} == ALGORITHM_CODES


def test_lua_and_python_agree_on_decide_argv_and_reply_layout(redis_client):
    """decide.lua reads its ARGV slots and writes its reply by the names quotas.contract.protocol gives them."""
    lua = lua_constants() + "return {" + ", ".join(f"DECIDE_ARG_{a.name}" for a in DecideArg) + ", DECIDE_FIXED_ARGS, "
    lua += ", ".join(f"FLAG_{f.name}" for f in DecideFlag) + ", REPLY_HEAD, REPLY_PER_WINDOW}"
    expected = [*(int(a) for a in DecideArg), DECIDE_FIXED_ARGS, *(int(f) for f in DecideFlag)]
    assert redis_client.eval(lua, 0) == [*expected, REPLY_HEAD, REPLY_PER_WINDOW]
    args = decide_args("c|", now=1, weight=2, cost=3, usage="u", mode="peek", multiplier="0.5", ban_policy="b",
                       request_id="r", day=4, day_offset=-18000, allowance=(8, 0.1, 250_000), specs=[b"s"])  # fmt: skip
    named = {a: args[a - 1] for a in DecideArg}
    assert named == {
        DecideArg.COST: 3, DecideArg.USAGE: "u", DecideArg.OPTIONS: "1|2|peek|0.5|b", DecideArg.REQUEST_ID: "r",
        DecideArg.FIELD_PREFIX: "c|", DecideArg.DAY: 4, DecideArg.DAY_OFFSET: -18000,
        DecideArg.ALLOWANCE: "8 0.1 250000",
    }  # fmt: skip
    assert [o.name.lower() for o in DecideOption] == ["now", "weight", "mode", "multiplier", "ban_policy"]
    assert decide_args("c|", cost=3)[DecideArg.OPTIONS - 1] == ""  # most routes: no options
    assert args[DECIDE_FIXED_ARGS:] == [b"s"]
    assert not re.search(r"\b(ARGV|args)\[\d", "".join(map(source, PARTS)))  # slots by name only (as written)


@pytest.mark.parametrize(
    ("script", "layout", "args", "named", "rest"),
    [
        ("REFUND", RefundArg, refund_args("c|", now_us=7, weight=None, specs=[b"s1", b"s2"]),
         {RefundArg.NOW: 7, RefundArg.WEIGHT: "", RefundArg.FIELD_PREFIX: "c|", RefundArg.TIMES: 1,
          RefundArg.LOG_AT: "", RefundArg.OWN: ""}, [b"s1", b"s2"]),
        ("REFUND", RefundArg, refund_args("c|", now_us=7, weight=3, specs=[b"q"], times=4, log_at_us=9, own=[1]),
         {RefundArg.NOW: 7, RefundArg.WEIGHT: 3, RefundArg.FIELD_PREFIX: "c|", RefundArg.TIMES: 4,
          RefundArg.LOG_AT: 9, RefundArg.OWN: "1"}, [b"q"]),
        ("ADJUST", AdjustArg, adjust_args("c|", now_us=7, delta=-5, usage="1|s", specs=[b"b"], day=19000),
         {AdjustArg.NOW: 7, AdjustArg.DELTA: -5, AdjustArg.USAGE: "1|s", AdjustArg.FIELD_PREFIX: "c|",
          AdjustArg.DAY: 19000, AdjustArg.OWN: "", AdjustArg.SETTLEMENT: "", AdjustArg.MEMORY: SETTLEMENT_MEMORY,
          AdjustArg.RELEASE: 0}, [b"b"]),
        ("ADJUST", AdjustArg, adjust_args("c|", now_us=7, delta=0, usage="", specs=[b"b", b"c"], day=1, own=[3, 0],
                                          settlement="s1", release=40),
         {AdjustArg.NOW: 7, AdjustArg.DELTA: 0, AdjustArg.USAGE: "", AdjustArg.FIELD_PREFIX: "c|",
          AdjustArg.DAY: 1, AdjustArg.OWN: "30", AdjustArg.SETTLEMENT: "s1", AdjustArg.MEMORY: SETTLEMENT_MEMORY,
          AdjustArg.RELEASE: 40}, [b"b", b"c"]),
        ("RELEASE", ReleaseArg, release_args("r1"), {ReleaseArg.REQUEST_ID: "r1"}, []),
        ("USAGE_ADD", UsageAddArg, usage_add_args(19000, "w", 4, ["f|a", 2]),
         {UsageAddArg.DAY: 19000, UsageAddArg.WRITER: "w", UsageAddArg.SEQ: 4}, ["f|a", 2]),
        ("HISTORY_TOP", HistoryTopArg, history_top_args(100, 7200, ["u.1", 3]),
         {HistoryTopArg.KEEP: 100, HistoryTopArg.EXPIRES_AT: 7200}, ["u.1", 3]),
    ],
)  # fmt: skip
def test_lua_and_python_agree_on_each_scripts_argv(redis_client, script, layout, args, named, rest):
    """Every script reads its ARGV by the generated <SCRIPT>_ARG_* names, where its Python builder puts each value."""
    names = [f"{script}_ARG_{a.name}" for a in layout]
    lua = lua_constants() + "return {" + ", ".join([*names, f"{script}_FIXED_ARGS"]) + "}"
    assert redis_client.eval(lua, 0) == [*(int(a) for a in layout), len(layout)]
    assert {a: args[a - 1] for a in layout} == named
    assert args[len(layout) :] == rest
    body = "".join(map(source, ENTRY_POINTS[script.lower()]))  # as written: the library carries the numbers
    assert not re.search(r"\b(ARGV|args)\[\d", body)  # slots by name only


def test_lua_writes_its_reply_in_the_order_of_decide_reply_fields(redis_client):
    """The generated REPLY_* and WINDOW_REPLY_* slots number DecideReply's head and WindowReply's fields in order."""
    head = [f"REPLY_{name}" for name in ("ALLOWED", "NOW_US", "FLAGS", "BAN_WAIT_US", "GRANTED")]
    per_window = [f"WINDOW_REPLY_{name}" for name in ("OK", "REMAINING", "RESET_US", "RETRY_US", "DELAY_US", "USED")]
    lua = lua_constants() + "return {" + ", ".join([*head, *per_window, "WINDOW_REPLY_ALERT", "NEVER"]) + "}"
    assert redis_client.eval(lua, 0) == [1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 6, 7, NEVER]
    assert (REPLY_HEAD, REPLY_PER_WINDOW) == (5, 7)


def test_decide_reply_decodes_what_decide_lua_answers(redis_client):
    """A real decision decodes by name: one window of 1 per minute allows, then refuses with a retry."""
    spec = WindowSpec(Algorithm.FIXED_WINDOW, 1, 60_000_000, 1, 1, 0, False, "l1:fw60").pack()
    heavy = WindowSpec(Algorithm.FIXED_WINDOW, 1, 60_000_000, 1, 2, 0, True, "l2:fw60").pack()
    now = 1_699_999_990_000_000  # 10 s into a minute (1_699_999_980 is a multiple of 60)
    keys = ["quota:test:{proto}", "quota:test:{proto}:u"]

    def decide(*specs: bytes) -> DecideReply:
        raw = redis_client.eval(script_source("decide"), 2, *keys, *decide_args("c|", now=now, specs=specs))
        return DecideReply.decode(raw, len(specs))

    first = decide(spec, heavy)
    assert first == DecideReply(True, now, 0, 0, 1, [
        WindowReply(ok=True, remaining=0, reset_us=50_000_000, retry_us=0, delay_us=0, used=0, alert=0),
        WindowReply(ok=False, remaining=1, reset_us=50_000_000, retry_us=NEVER, delay_us=0, used=0, alert=0),
    ])  # fmt: skip
    second = decide(spec)
    assert not second.allowed
    assert second.windows == [WindowReply(False, 0, 50_000_000, 50_000_000, 0, 0, 0)]
    banned = DecideReply.decode([0, now, DecideFlag.BANNED, 5, 1], 2)  # limits unread: the head alone
    assert (banned.flags, banned.ban_wait_us, banned.windows) == (DecideFlag.BANNED, 5, [])
    with pytest.raises(ValueError, match="replied 6 values for 1 windows"):
        DecideReply.decode([1, now, 0, 0, 1, 1], 1)
    budgets = AdjustedBudget.decode_all([-1, 0, 700, 1])
    assert budgets == [AdjustedBudget(-1, 0), AdjustedBudget(700, 1)]
    assert [b.period_ended for b in budgets] == [True, False]


def test_lua_unpacks_the_window_spec_python_packs(redis_client):
    """SPEC_FORMAT, generated from WindowSpec, reads back every number and the field Python packed."""
    spec = WindowSpec(Algorithm.LEAKY_BUCKET, 10, 60_000_000, 15, 2, 500_000, True, "l1:lb60")
    period = WindowSpec.for_period(
        Algorithm.BUDGET, 5_000_000, 1, False, "b:bdd", start_us=1_700_000_000_000_000,
        end_us=1_700_086_400_000_000, next_end_us=1_700_172_800_000_000,
    )  # fmt: skip
    assert period == (Algorithm.BUDGET, 5_000_000, 1_700_000_000_000_000, 1_700_086_400_000_000, 1,
                      1_700_172_800_000_000, False, "b:bdd")  # fmt: skip
    # Numbers as text, exact, rather than through the conversion of a Lua number into a Redis reply.
    lua = lua_constants() + (
        "local t = {struct.unpack(SPEC_FORMAT, ARGV[1])} "
        "for i = 1, 7 do t[i] = string.format('%.17g', t[i]) end return {unpack(t, 1, 8)}"
    )
    for each in (spec, period):
        packed = each.pack()
        assert WindowSpec.unpack(packed) == each
        numbers = [int(each[i]) for i in range(7)]
        assert redis_client.eval(lua, 0, packed) == [*(str(n).encode() for n in numbers), each.field.encode()]
    with pytest.raises(ValueError, match="longer than 255 bytes"):
        spec._replace(field="x" * 256).pack()


def test_lua_parse_spec_names_a_rolling_window_and_a_period_by_what_they_hold(redis_client):
    """parse_spec gives a rolling window its window, cap and max delay, and a period its start, stop and next stop."""
    common = (resources.files("quotas.contract") / "lua" / "common.lua").read_text(encoding="utf-8")
    fields = ["code", "limit", "weight", "field", "window", "cap", "max_delay", "start", "stop", "next_stop"]
    lua = lua_constants() + common + "\nlocal w = parse_spec(ARGV[1])\n"
    lua += "return {w.shadow and 'shadow' or 'enforced', " + ", ".join(f"tostring(w.{f})" for f in fields) + "}"

    def parsed(spec: WindowSpec) -> dict[str, str]:
        shadow, *values = redis_client.eval(lua, 0, spec.pack())
        return {"shadow": shadow.decode(), **{f: v.decode() for f, v in zip(fields, values, strict=True)}}

    rolling = WindowSpec(Algorithm.LEAKY_BUCKET, 10, 60_000_000, 15, 2, 500_000, True, "l1:lb60")
    assert parsed(rolling) == {
        "shadow": "shadow", "code": "5", "limit": "10", "weight": "2", "field": "l1:lb60", "window": "60000000",
        "cap": "15", "max_delay": "500000", "start": "nil", "stop": "nil", "next_stop": "nil",
    }  # fmt: skip
    day = WindowSpec.for_period(Algorithm.PERIOD_REQUESTS, 100, 1, False, "p:prd", start_us=10, end_us=20,
                                next_end_us=30)  # fmt: skip
    assert parsed(day) == {
        "shadow": "enforced", "code": "8", "limit": "100", "weight": "1", "field": "p:prd", "window": "nil",
        "cap": "nil", "max_delay": "nil", "start": "10", "stop": "20", "next_stop": "30",
    }  # fmt: skip


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
def test_every_script_starts_with_the_generated_constants_and_uses_no_bare_code(name):
    script = script_source(name)
    assert script.startswith(header(ENTRY_POINTS[name]))
    assert set(header(ENTRY_POINTS[name]).splitlines()) <= set(lua_constants().splitlines())
    body = "".join(map(source, ENTRY_POINTS[name]))  # as written: the library carries the numbers
    assert not re.search(r"\bcode\]?\s*(==|~=|<=|>=|<|>)\s*\d", body, re.IGNORECASE)  # algorithms by name only
    assert not re.search(r"ALGORITHMS\[\d\]", body)


def test_settings_algorithms_and_key_tags_come_from_the_protocol():
    assert set(ALGORITHMS) <= set(ALGORITHM_CODES)
    tags = {a.key_tag for a in Algorithm}
    assert len(tags) == len(Algorithm)  # each algorithm's state has a name of its own
    assert window_field("l1", "token_bucket", 60) == "l1:tb60"
