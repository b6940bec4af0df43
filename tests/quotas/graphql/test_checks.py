"""QUOTAS['GRAPHQL_MAX_COMPLEXITY'] is validated at start-up (quotas.E059), GraphQL library or not."""

from __future__ import annotations

from quotas.checks import check_settings
from quotas.checks.engine import check_graphql_complexity


def ids(messages) -> list[str]:
    return [m.id for m in messages]


def test_the_default_cap_passes(set_quotas):
    """1000 (the default) is within MAX_REQUEST_WEIGHT's default of 1,000,000."""
    assert check_graphql_complexity() == []
    assert "quotas.E059" not in ids(check_settings())


def test_a_cap_above_max_request_weight_is_an_error(set_quotas):
    """A query the cap admits would be refused as out of bounds: quotas.E059 names both settings."""
    set_quotas(GRAPHQL_MAX_COMPLEXITY=5000, MAX_REQUEST_WEIGHT=4000)
    (error,) = check_graphql_complexity()
    assert error.id == "quotas.E059"
    assert "GRAPHQL_MAX_COMPLEXITY'] = 5000" in error.msg
    assert "MAX_REQUEST_WEIGHT'] = 4000" in error.msg
    assert "Lower GRAPHQL_MAX_COMPLEXITY" in error.hint


def test_a_cap_that_is_not_a_positive_int_is_an_error(set_quotas):
    """0, a string or a float are refused with the setting's own id and hint; the comparison stays quiet."""
    for wrong in (0, "100", 10.5):
        set_quotas(GRAPHQL_MAX_COMPLEXITY=wrong)
        assert ids(check_settings()).count("quotas.E059") == 1, wrong
        assert check_graphql_complexity() == []
