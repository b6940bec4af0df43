"""The Lua library on a real server: FCALL on Redis 7, EVALSHA on Redis 6.2, the same decisions on both."""

from __future__ import annotations

import logging
import re

import pytest
import redis
from django.conf import settings
from django.test import override_settings

from quotas.contract.library import (
    ENTRY_POINTS,
    PARTS,
    function_name,
    header,
    library_name,
    library_source,
    part,
    script_source,
    source,
)
from quotas.contract.protocol import lua_constants
from quotas.formats.rates import Rate, parse_rates
from quotas.rules.limits import LimitRule
from quotas.runtime import Runtime, build_runtime
from quotas.store.transport import LuaScript

#: How the library is loaded into a redis-server (FUNCTION, SCRIPT) on 7 and 6.2.
pytestmark = pytest.mark.redis

T0 = 1_700_000_040.0  # aligned to a minute

ALGORITHMS = ["fixed_window", "sliding_window_log", "sliding_window_counter", "token_bucket", "leaky_bucket"]


def _windows():
    """One 3/min limit of every algorithm, a 4/day request quota and a daily money budget of 5 units."""
    rules = [
        LimitRule(id=f"l-{a}", name=a, rates=parse_rates("3/min"), algorithm=a, price_micros=1) for a in ALGORITHMS
    ]
    rules.append(LimitRule(id="day", name="day", rates=(Rate(4, 86400),), algorithm="period_requests", period="day"))
    rules.append(
        LimitRule(id="money", name="money", rates=(Rate(5, 86400),), algorithm="budget", period="day", currency="USD")
    )
    return [w for r in rules for w in r.windows]


def _engine_on(url: str) -> Runtime:
    with override_settings(QUOTAS={**settings.QUOTAS, "REDIS_URL": url}):
        return build_runtime()


def _sequence(runtime: Runtime) -> list[tuple[bool, list[tuple[bool, int | None, int, int | None]]]]:
    """Six decisions of one client across two minutes: what each window said each time."""
    windows = _windows()
    out = []
    for offset in (0, 0.5, 1, 2, 30, 125):
        d = runtime.guard.decide("{c.1}", windows, now=T0 + offset, cost_micros=1, usage="1|api")
        out.append((d.allowed, [(s.ok, s.remaining, s.reset_us, s.retry_us) for s in d.states]))
    return out


def test_redis_7_decides_by_fcall(runtime, redis_client):
    assert redis_client.info("server")["redis_version"] >= "7"
    assert runtime.guard.decide("{c.0}", _windows()).allowed  # loads the library if this server lacks it
    redis_client.config_resetstat()
    assert runtime.guard.decide("{c.1}", _windows()).allowed
    stats = redis_client.info("commandstats")
    assert stats["cmdstat_fcall"]["calls"] == 1
    assert "cmdstat_evalsha" not in stats
    assert redis_client.function_list(library=library_name())


def test_redis_6_2_decides_by_evalsha_exactly_as_redis_7_by_fcall(runtime, redis62, caplog):
    """Same specs, same times, same answers: the one Lua source behaves the same through both wrappers."""
    old = _engine_on(redis62.url)
    try:
        with caplog.at_level(logging.INFO, logger="quotas.store.transport"):
            on_62 = _sequence(old)
        # It learned from the first call's "unknown command".
        assert not old.store.transport.script("decide").functions
        assert "runs no functions" in caplog.text
        on_7 = _sequence(runtime)
        assert runtime.store.transport.script("decide").functions
        assert on_62 == on_7
        assert [allowed for allowed, _ in on_7] == [True, True, True, False, False, True]
        client = redis.Redis.from_url(redis62.url)
        try:
            assert client.info("server")["redis_version"].startswith("6.2")
            assert client.info("commandstats")["cmdstat_evalsha"]["calls"] == 6
        finally:
            client.close()
    finally:
        old.close()


def test_a_lost_library_is_loaded_again_and_the_request_counted_once(runtime, redis_client):
    """FUNCTION FLUSH (or a restart without persistence) costs no request: FCALL's "not found" means nothing ran."""
    windows = LimitRule(id="l", name="l", rates=parse_rates("5/min"), algorithm="fixed_window").windows
    assert runtime.guard.decide("{c.2}", windows, now=T0).states[0].remaining == 4
    redis_client.function_flush()
    assert not redis_client.function_list()
    assert runtime.guard.decide("{c.2}", windows, now=T0 + 1).states[0].remaining == 3  # counted once
    assert redis_client.function_list(library=library_name())
    assert runtime.store.transport.script("decide").functions


def test_a_user_who_may_not_load_functions_is_served_by_evalsha(runtime, redis_server, redis_client):
    """An ACL user allowed EVALSHA but not FUNCTION LOAD (some managed Redis): decisions still go through."""
    redis_client.function_flush()
    redis_client.acl_setuser(
        "scripts-only", enabled=True, passwords=["+pw"], keys=["*"], commands=["+@all", "-function"], reset=True
    )
    try:
        url = redis_server.url.replace("redis://", "redis://scripts-only:pw@")
        limited = _engine_on(url)
        try:
            windows = LimitRule(id="l", name="l", rates=parse_rates("5/min"), algorithm="fixed_window").windows
            assert [limited.guard.decide("{c.3}", windows, now=T0).states[0].remaining for _ in range(2)] == [4, 3]
            assert not limited.store.transport.script("decide").functions
        finally:
            limited.close()
    finally:
        redis_client.acl_deluser("scripts-only")


def _pairs(flat: list) -> dict:
    return dict(zip(flat[::2], flat[1::2], strict=True))


def test_every_entry_point_loads_in_both_forms(redis_client, redis62):
    """The library registers every entry point as a function on Redis 7; each entry point loads as a script on both."""
    assert redis_client.function_load(library_source(), replace=True) == library_name().encode()
    (library,) = redis_client.function_list(library=library_name())
    functions = {_pairs(fn)[b"name"].decode() for fn in _pairs(library)[b"functions"]}
    assert functions == {function_name(e) for e in ENTRY_POINTS}
    old = redis.Redis.from_url(redis62.url)
    try:
        for entry in ENTRY_POINTS:
            for client in (old, redis_client):
                client.script_load(script_source(entry))
    finally:
        old.close()


def test_a_new_release_never_replaces_the_library_an_older_one_calls(redis_client):
    """The library and its functions are named by a hash of the code: two releases' libraries coexist."""
    assert library_name().startswith("quotas_")
    assert library_source().startswith(f"#!lua name={library_name()}\n")
    assert all(function_name(e).startswith(library_name() + "_") for e in ENTRY_POINTS)
    script = LuaScript.entry(redis_client, "decide")
    assert script.command(["k"], ["a"]) == ("FCALL", function_name("decide"), 1, "k", "a")
    script.functions = False
    assert script.command(["k"], ["a"]) == ("EVALSHA", script.sha, 1, "k", "a")


def test_the_library_carries_the_contracts_numbers_as_literals():
    """No function of either form captures a contract constant (an upvalue each, defined again on every EVALSHA):
    the parts' names of them are replaced by their values, a negative one in parentheses (``x - NEVER``)."""
    named = re.compile(r"\b(DECIDE_ARG_[A-Z_]+|REPLY_[A-Z_]+|WINDOW_REPLY_[A-Z_]+|COUNTER\.[A-Z_]+|NEVER)\b")
    assert named.search(source("decide.lua"))
    forms = [(library_source(), header(PARTS)), *((script_source(e), header(ENTRY_POINTS[e])) for e in ENTRY_POINTS)]
    for form, head in forms:
        body = form[form.index(head) + len(head) :]
        assert not named.search(re.sub(r"--[^\n]*", "", body))
    assert "(-1)" in part("decide.lua") or "(-1)" in part("sliding_window_counter.lua")


def test_each_form_defines_only_the_constants_its_code_reads():
    """The EVAL form's header runs on every call on Redis 6.2: it carried all of lua_constants(), the usage
    counters' table among them, which no code reads once the parts carry literals (4.5k instructions a decision)."""
    assert "local COUNTER = " in lua_constants()
    for parts in (PARTS, *ENTRY_POINTS.values()):
        head = header(parts)
        assert set(head.splitlines()) <= set(lua_constants().splitlines())
        code = "\n".join([head, *map(part, parts)])
        for name in re.findall(r"^local ([A-Z][A-Z0-9_]*) = ", head, re.MULTILINE):
            assert len(re.findall(rf"\b{name}\b", code)) >= 2, name  # its definition and a reader
    assert "COUNTER" not in script_source("decide")
    assert "COUNTER" not in library_source()
    assert "local IS_PERIOD = " in script_source("decide")
    assert "local HAS_OWN_KEY = " in script_source("decide")


def test_no_function_captures_a_parts_own_named_value():
    """A part's own ``local EPSILON = 1`` read by a function is an upvalue it captures on every EVALSHA (Redis
    6.2): every use is written in as a literal, and only the definition keeps the name."""
    own = {"EPSILON", "EXPIRY_HEADROOM", "SWEEP_ODDS", "SWEEP_FIELDS", "STRIKE_MEMORY", "GENERATION_FIELD", "BAN"}
    assert all(re.search(rf"^local {name} = ", "".join(map(source, PARTS)), re.MULTILINE) for name in own)
    for form in (library_source(), *map(script_source, ENTRY_POINTS)):
        for name in own:
            uses = [line for line in form.splitlines() if re.search(rf"\b{name}\b", line)]
            assert all(line.startswith(f"local {name} = ") for line in uses), (name, uses)
    assert "if over <= 1 and late <= 1 then" in part("gcra.lua")
