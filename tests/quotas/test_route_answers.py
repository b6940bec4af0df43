"""RuleSet.routes: the hot path's answers by plan, scope and method, read without a call, are for_request's own,
and kept only where the path changes nothing and the method is a usual one."""

from __future__ import annotations

from decimal import Decimal

from quotas.formats.rates import parse_rates
from quotas.rules.limits import LimitRule
from quotas.rules.snapshot import PlanRules, RuleSet


def _rule(limit_id: str, *, scope: str = "", path_prefix: str = "") -> LimitRule:
    return LimitRule(id=limit_id, name=limit_id, rates=parse_rates("10/min"), scope=scope, path_prefix=path_prefix)


def _rules(*limits: LimitRule) -> RuleSet:
    plan = PlanRules(id=1, slug="p", name="P", price=Decimal(0), priority=0, limits=limits)
    return RuleSet([plan], default_plan_id=1)


def test_an_answer_is_kept_by_plan_scope_and_method_and_is_for_requests():
    """The kept answer is the one for_request gave, under the key the hot path reads."""
    rules = _rules(_rule("search", scope="search"), _rule("all"))
    found = rules.for_request(1, None, "search", "/a/", "GET")
    assert rules.routes == {(1, None, "search", "GET"): found}
    assert [w.limit_id for w in found.windows] == ["search", "all"]


def test_a_made_up_method_adds_no_answer():
    """A client's made-up method is answered as any other, but kept nowhere: the table stays bounded."""
    rules = _rules(_rule("all"))
    found = rules.for_request(1, None, "", "/a/", "BREW")
    assert [w.limit_id for w in found.windows] == ["all"]
    assert rules.routes == {}


def test_no_answer_is_kept_for_a_plan_whose_limits_name_a_path():
    """Where a limit names a path, two paths of one scope and method differ: nothing is kept by scope and method."""
    rules = _rules(_rule("files", path_prefix="/files/"), _rule("all"))
    assert [w.limit_id for w in rules.for_request(1, None, "", "/files/x", "GET").windows] == ["files", "all"]
    assert [w.limit_id for w in rules.for_request(1, None, "", "/other/", "GET").windows] == ["all"]
    assert rules.routes == {}
