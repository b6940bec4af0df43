"""What a client of a GraphQL endpoint sees, whichever library serves it: the library's test module
(test_graphene.py, test_strawberry.py) imports these tests and its urls serve the same schema at /graphql.

The schema: ``books { title author { name } }``. Complexities (quotas/graphql/complexity.py):
``{ books { title } }`` is 1 + 2 = 3; ``{ books { title author { name } } }`` is 1 + 2 + 2 + 3 = 8.
"""

from __future__ import annotations

import json
import sys
import types
from decimal import Decimal

import pytest
from django.test import Client

from plans.models import CostBudget
from tests.factories import EndpointLimitFactory, PlanFactory

CHEAP = "{ books { title } }"
EXPENSIVE = "{ books { title author { name } } }"


@pytest.fixture
def client() -> Client:
    return Client(raise_request_exception=False)


@pytest.fixture
def plan(db):
    """The default plan: 100 units a minute, plan-wide."""
    plan = PlanFactory(slug="free", is_default=True)
    EndpointLimitFactory(plan=plan, name="graph", rates="100/min", algorithm="fixed_window")
    return plan


def post(client: Client, query: str, path: str = "/graphql", **extra: str):
    """POST ``query`` as GraphQL over HTTP's JSON body."""
    return client.post(path, json.dumps({"query": query}), content_type="application/json", **extra)


def docs_module(monkeypatch: pytest.MonkeyPatch, name: str, source: str) -> types.ModuleType:
    """``source`` (a docs snippet) run as the module ``name``, in sys.modules for this test (strawberry reads
    a type's annotations from its module)."""
    module = types.ModuleType(name)
    monkeypatch.setitem(sys.modules, name, module)
    exec(compile(source, f"<docs {name}>", "exec"), module.__dict__)
    return module


def remaining(response) -> int:
    """The ``r`` of the response's RateLimit item."""
    return int(response["RateLimit"].split(";r=")[1].split(";")[0])


def test_a_cheap_query_is_answered_with_its_headers(client, plan):
    """{ books { title } } (complexity 3) is answered by the library, and spends 3 of the 100 units."""
    response = post(client, CHEAP)
    assert response.status_code == 200
    assert json.loads(response.content) == {"data": {"books": [{"title": "Dune"}, {"title": "Emma"}]}}
    assert response["RateLimit-Policy"] == '"graph";q=100;qu="requests";w=60'
    assert remaining(response) == 97
    assert ";quotas-weight=3" in response["RateLimit"]


def test_an_expensive_query_spends_its_complexity(client, plan):
    """After the cheap query (3), the nested one (8) takes remaining from 97 to 89."""
    assert remaining(post(client, CHEAP)) == 97
    response = post(client, EXPENSIVE)
    assert response.status_code == 200
    assert json.loads(response.content)["data"]["books"][0] == {"title": "Dune", "author": {"name": "Herbert"}}
    assert remaining(response) == 89
    assert ";quotas-weight=8" in response["RateLimit"]


def test_the_plans_limit_refuses_with_a_graphql_error_and_the_rest_headers(client, db):
    """10 units a minute: one query of 8 passes, the next is a 429 whose GraphQL error carries the problem
    details and whose headers are a REST refusal's (Retry-After, RateLimit with r=2)."""
    plan = PlanFactory(slug="small", is_default=True)
    EndpointLimitFactory(plan=plan, name="graph", rates="10/min", algorithm="fixed_window")
    assert remaining(post(client, EXPENSIVE)) == 2
    refused = post(client, EXPENSIVE)
    assert refused.status_code == 429
    assert refused["Content-Type"] == "application/json"
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert remaining(refused) == 2
    (error,) = json.loads(refused.content)["errors"]
    problem = error["extensions"]
    assert error["message"] == problem["detail"]
    assert problem["type"] == "https://iana.org/assignments/http-problem-types#quota-exceeded"
    assert (problem["status"], problem["reason"], problem["plan"]) == (429, "rate_limited", "small")
    assert problem["limit"]["name"] == "graph"
    assert problem["retry_after"] == int(refused["Retry-After"])
    assert post(client, "{ books { __typename } }").status_code == 200  # 2 units still fit


def test_an_over_complex_query_is_refused_before_anything_is_spent(client, plan, set_quotas):
    """Over GRAPHQL_MAX_COMPLEXITY: 400, a GraphQL error naming the complexity and the cap; no units spent."""
    set_quotas(GRAPHQL_MAX_COMPLEXITY=5)
    refused = post(client, EXPENSIVE)
    assert refused.status_code == 400
    assert "RateLimit" not in refused
    (error,) = json.loads(refused.content)["errors"]
    problem = error["extensions"]
    assert problem["type"] == "/problems/query-too-complex"
    assert (problem["reason"], problem["complexity"], problem["max_complexity"]) == ("query_too_complex", 8, 5)
    assert error["message"].startswith("This query's complexity is 8; this endpoint answers queries of complexity up")
    assert remaining(post(client, CHEAP)) == 97


def test_a_syntax_error_is_the_librarys_to_answer(client, plan):
    """A query that does not parse reaches the library, which answers it with its own error (not a 500); the
    request spends 1."""
    response = post(client, "{ books { title ")
    assert response.status_code in (200, 400)
    (error,) = json.loads(response.content)["errors"]
    assert "Syntax Error" in error["message"]
    assert "extensions" not in error or "reason" not in error["extensions"]  # the library's, not ours
    assert remaining(response) == 99


def test_a_priced_limit_charges_the_budget_by_complexity(client, db):
    """A limit priced 0.001 charges a query of complexity 8 0.008: two fit a daily budget of 0.02, the third is
    refused with the budget's problem as a GraphQL error."""
    plan = PlanFactory(slug="priced", is_default=True)
    EndpointLimitFactory(plan=plan, name="graph", rates="1000/min", price=Decimal("0.001"))
    CostBudget.objects.create(plan=plan, period="day", amount=Decimal("0.02"), currency="EUR")
    assert post(client, EXPENSIVE).status_code == 200
    assert post(client, EXPENSIVE).status_code == 200
    refused = post(client, EXPENSIVE)
    assert refused.status_code == 429
    problem = json.loads(refused.content)["errors"][0]["extensions"]
    assert problem["reason"] == "budget_exceeded"
    assert Decimal(problem["budget"]["spent"]) == Decimal("0.016")
    assert Decimal(problem["budget"]["requested"]) == Decimal("0.008")
    assert post(client, "{ books { title } }").status_code == 200  # 0.003 still fits


def test_a_get_query_and_a_query_in_the_url_of_a_post_are_weighed(client, plan):
    """GET ?query= spends its complexity; a POST's URL query is weighed with its body's (graphene-django would
    run the URL's), so neither place is a way round the count."""
    response = client.get("/graphql", {"query": EXPENSIVE})
    assert response.status_code == 200
    assert remaining(response) == 92
    both = client.post(f"/graphql?query={CHEAP}", json.dumps({"query": CHEAP}), content_type="application/json")
    assert both.status_code == 200
    assert remaining(both) == 92 - 3 - 3


def test_introspection_spends_one(client, plan):
    """GraphiQL's introspection (__schema) spends 1, however much of the schema it selects."""
    query = "{ __schema { queryType { name fields { name type { name kind ofType { name kind } } } } } }"
    response = post(client, query)
    assert response.status_code == 200
    assert json.loads(response.content)["data"]["__schema"]["queryType"]["name"] == "Query"
    assert remaining(response) == 99


def test_a_request_with_no_query_is_an_ordinary_request(client, plan):
    """A GET without a query (GraphiQL's page, or the library's "no query" error) spends the limit's own weight."""
    response = client.get("/graphql")
    assert response.status_code < 500
    assert remaining(response) == 99


def test_the_views_own_cap_replaces_the_setting(client, plan):
    """max_complexity=4 on the view: the cheap query (3) passes, the nested one (8) is refused there."""
    assert post(client, CHEAP, path="/graphql-small").status_code == 200
    refused = post(client, EXPENSIVE, path="/graphql-small")
    assert refused.status_code == 400
    assert json.loads(refused.content)["errors"][0]["extensions"]["max_complexity"] == 4


def test_a_bad_api_key_is_a_graphql_401(client, plan):
    """An unknown API key: the REST refusal's 401, WWW-Authenticate included, as a GraphQL error."""
    refused = post(client, CHEAP, HTTP_X_API_KEY="not-a-key")
    assert refused.status_code == 401
    assert refused["WWW-Authenticate"] == 'ApiKey header="X-API-Key"'
    assert json.loads(refused.content)["errors"][0]["extensions"]["reason"] == "api_key_unknown"


def test_a_cost_past_max_request_cost_is_a_400(client, db, set_quotas):
    """Priced per unit, a query may cost more than MAX_REQUEST_COST: a 400 naming the bound, nothing charged."""
    set_quotas(MAX_REQUEST_COST=3)
    plan = PlanFactory(slug="dear", is_default=True)
    EndpointLimitFactory(plan=plan, name="graph", rates="1000/min", price=Decimal("0.5"))
    refused = post(client, EXPENSIVE)  # 8 x 0.5 = 4
    assert refused.status_code == 400
    problem = json.loads(refused.content)["errors"][0]["extensions"]
    assert (problem["reason"], problem["type"]) == ("quota_cost_out_of_bounds", "/problems/request-out-of-bounds")
    assert post(client, CHEAP).status_code == 200  # 3 x 0.5 = 1.5


def test_with_quotas_off_the_library_answers_alone(client, plan, set_quotas):
    """QUOTAS['ENABLED'] = False takes the gate out: no cap, no headers."""
    set_quotas(ENABLED=False, GRAPHQL_MAX_COMPLEXITY=1)
    response = post(client, EXPENSIVE)
    assert response.status_code == 200
    assert "RateLimit" not in response


def test_a_document_too_deep_to_weigh_is_refused(client, plan):
    """Fragments spreading each other thousands deep: 400 query-too-complex without a figure, not a 500."""
    fragments = ["fragment F0 on Book { title }"]
    fragments += [f"fragment F{i} on Book {{ ...F{i - 1} }}" for i in range(1, 3000)]
    refused = post(client, " ".join(fragments) + " { books { ...F2999 } }")
    assert refused.status_code == 400
    problem = json.loads(refused.content)["errors"][0]["extensions"]
    assert (problem["reason"], problem["complexity"]) == ("query_too_complex", None)
    assert problem["detail"].startswith("This query nests fields or fragments too deeply to be weighed")
