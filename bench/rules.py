"""The rules the benchmark runs with: one plan, no database.

``QUOTAS['RULES_BACKEND'] = 'bench.rules.BenchBackend'`` makes every request
use the default plan below. Its limits are told apart by ``quota_scope``, so
one engine (one set of settings) serves every in-process variant and no
setting has to change between rounds, which would rebuild the engine.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from quotas.formats.rates import Rate, parse_rates
from quotas.rules.limits import LimitRule
from quotas.rules.snapshot import PlanRules, RuleSet, Subscriber

PLAN_ID = 1

#: ``quota_scope`` of the views each group of limits applies to.
ONE_LIMIT_SCOPE = "one"
FIVE_LIMITS_SCOPE = "five"
TEN_LIMITS_SCOPE = "ten"
FLOOD_SCOPE = "flood"
ONE_SWC_SCOPE = "one-swc"
TRAFFIC_SCOPE = "traffic"

#: The limit a flooding client is held to (section 3).
FLOOD_RATE = "5/min"


def _rule(limit_id: str, scope: str, rates: str, algorithm: str) -> LimitRule:
    return LimitRule(id=limit_id, name=limit_id, rates=parse_rates(rates), algorithm=algorithm, scope=scope)


#: Rates are huge so that nothing is refused while timing. One limit per
#: algorithm, so the five-limit decision exercises every Lua branch; the
#: sliding log gets a one-second window because it stores one entry per
#: admitted request, and a long window would let it grow through the run.
FIVE_LIMITS: tuple[LimitRule, ...] = (
    _rule("burst", FIVE_LIMITS_SCOPE, "1000000/s", "token_bucket"),
    _rule("steady", FIVE_LIMITS_SCOPE, "1000000/min", "leaky_bucket"),
    _rule("minute", FIVE_LIMITS_SCOPE, "1000000/min", "sliding_window_counter"),
    _rule("hour", FIVE_LIMITS_SCOPE, "100000000/hour", "fixed_window"),
    _rule("exact", FIVE_LIMITS_SCOPE, "1000000/s", "sliding_window_log"),
)

ONE_LIMIT: LimitRule = _rule("single", ONE_LIMIT_SCOPE, "1000000/min", "token_bucket")
#: One limit of the algorithm limits' sliding window counter uses, for a like-for-like Redis cost (section 10).
ONE_SWC_LIMIT: LimitRule = _rule("single-swc", ONE_SWC_SCOPE, "1000000/min", "sliding_window_counter")

#: Ten limits, two per algorithm, plus a daily money budget that every request spends from (one limit has a
#: price): a heavy plan's decision, still one EVALSHA.
TEN_LIMITS_AND_BUDGET: tuple[LimitRule, ...] = (
    _rule("ten-burst", TEN_LIMITS_SCOPE, "1000000/s", "token_bucket"),
    _rule("ten-bucket-hour", TEN_LIMITS_SCOPE, "100000000/hour", "token_bucket"),
    _rule("ten-steady", TEN_LIMITS_SCOPE, "1000000/min", "leaky_bucket"),
    _rule("ten-steady-s", TEN_LIMITS_SCOPE, "1000000/s", "leaky_bucket"),
    _rule("ten-minute", TEN_LIMITS_SCOPE, "1000000/min", "sliding_window_counter"),
    _rule("ten-hour", TEN_LIMITS_SCOPE, "100000000/hour", "sliding_window_counter"),
    _rule("ten-fixed-hour", TEN_LIMITS_SCOPE, "100000000/hour", "fixed_window"),
    _rule("ten-fixed-day", TEN_LIMITS_SCOPE, "1000000000/day", "fixed_window"),
    _rule("ten-exact", TEN_LIMITS_SCOPE, "1000000/s", "sliding_window_log"),
    LimitRule(
        id="ten-exact-2s",
        name="ten-exact-2s",
        rates=parse_rates("1000000/2s"),
        algorithm="sliding_window_log",
        scope=TEN_LIMITS_SCOPE,
        price_micros=1000,  # $0.001 a request, spent from the budget below
    ),
    LimitRule(
        id="day-budget",
        name="day-budget",
        rates=(Rate(10**12, 86400),),
        algorithm="budget",
        period="day",
        currency="USD",
        scope=TEN_LIMITS_SCOPE,
    ),
)

FLOOD_LIMIT: LimitRule = _rule("flood", FLOOD_SCOPE, FLOOD_RATE, "fixed_window")

#: The traffic section's plan (section 12): window name -> rate, in a syntax QuotaThrottle, DRF,
#: django-ratelimit and limits all read. High enough that no client of the Zipf traffic is refused (the
#: busiest sends about a tenth of all requests).
TRAFFIC_RATES = {"second": "1000/second", "minute": "20000/minute", "day": "1000000/day"}
#: The same plan as one QuotaThrottle limit of three rates: one decision, one script call.
TRAFFIC_LIMIT: LimitRule = _rule("traffic", TRAFFIC_SCOPE, "; ".join(TRAFFIC_RATES.values()), "sliding_window_counter")


class BenchBackend:
    """A rules backend with one default plan and no known subscribers."""

    def load(self) -> RuleSet:
        plan = PlanRules(
            id=PLAN_ID,
            slug="bench",
            name="Bench",
            price=Decimal(0),
            priority=0,
            limits=(ONE_LIMIT, ONE_SWC_LIMIT, *FIVE_LIMITS, *TEN_LIMITS_AND_BUDGET, FLOOD_LIMIT, TRAFFIC_LIMIT),
        )
        return RuleSet([plan], default_plan_id=PLAN_ID)

    def subscriber_for_key(self, key_hash: str) -> Subscriber | None:
        return None

    def subscriber_for_user(self, user_id: Any) -> Subscriber | None:
        # No subscription: every user falls back to the default plan.
        return None

    def known_key_hashes(self) -> tuple[str, ...]:
        return ()
