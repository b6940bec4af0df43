"""Section 14 of the bench (instructions inside redis-server under callgrind): the cuts of decide() it loads
run on the tests' Redis, and its phase arithmetic."""

from __future__ import annotations

import pytest

from bench.redis_count import CUTS, _cut, phases
from quotas.contract.library import library_source, script_source
from quotas.contract.protocol import Algorithm, WindowSpec, decide_args


@pytest.mark.parametrize("cut", sorted(CUTS))
def test_each_cut_of_decide_loads_and_returns_1(fresh_redis, cut):
    """A cut whose line decide.lua no longer has raises; each cut of the EVAL form runs and answers 1."""
    source = _cut(script_source("decide"), cut)
    assert source != script_source("decide")
    assert _cut(library_source(), cut) != library_source()
    args = decide_args(
        "c|", usage="1|one", specs=[WindowSpec(Algorithm.TOKEN_BUCKET, 5, 60_000_000, 5, 1, 0, False, "l:tb60").pack()]
    )
    assert fresh_redis.eval(source, 2, "{b}:bucket", "{b}:usage:20261129", *args) == 1


def test_a_cut_that_decide_lua_lost_is_an_error():
    with pytest.raises(RuntimeError, match="no line"):
        _cut("local function decide(keys, args)\n  return 1\nend\n", "read")


def test_phases_are_the_differences_between_consecutive_cuts():
    counts = {"q": 100, "q/noop": 10, "q/parse": 20, "q/read": 35, "q/check": 60, "q/commit": 70, "q/no_reply": 90}
    got = phases(counts, "q")
    assert list(got.values()) == [10, 10, 15, 25, 10, 20, 10, 100]
    assert sum(list(got.values())[:-1]) == got["total"]


def test_the_report_prints_section_14_as_a_table():
    """The run's JSON had section 14 while the printed report left it out."""
    from bench.report import render

    ins = {"limits_swc": 60_000, "quota_1": 120_000, "quota_5": 300_000}
    for variant in ("quota_1", "quota_5"):
        ins |= {f"{variant}/{cut}": 10_000 * (i + 1) for i, cut in enumerate(CUTS)}
    server = {"redis_version": "7.0.15", "call": "FCALL", "instructions": ins}
    results = {
        "machine": {"cpu_count": 2, "python": "3", "redis_server": "7", "redis_py": "5", "hiredis": "3",
                    "django": "5", "drf": "3"},
        "run": {"mode": "quick", "rounds": 1, "requests_per_round": 1, "seconds": 1},
        "timestamp": "now",
        "redis_count": {"calls": 600, "servers": [server]},
    }  # fmt: skip
    text = render(results)
    assert "14. CPU instructions per decision inside redis-server" in text
    assert "quota_1               120.0k   2.00x limits_swc" in text
    assert "phases of quota_5:" in text
    assert "14." in render(results | {"redis_count": {"skipped": "no valgrind"}})
    assert "no valgrind" in render(results | {"redis_count": {"skipped": "no valgrind"}})
