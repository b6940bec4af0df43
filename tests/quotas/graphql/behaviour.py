"""What a client of a GraphQL endpoint sees, whichever library serves it: the library's test module
(test_graphene.py, test_strawberry.py) imports these tests and its urls serve the same schema at /graphql.

The schema: ``books { title author { name } }``. Complexities (quotas/graphql/complexity.py):
``{ books { title } }`` is 1 + 2 = 3; ``{ books { title author { name } } }`` is 1 + 2 + 2 + 3 = 8.
``/graphql-small`` caps queries at 4: ``Cheap`` (3) runs there, ``Expensive`` (8) must not.

Where the two libraries read a request differently (graphene-django takes ``query`` and ``operationName``
each from the URL or the body, strawberry reads only the body of a POST, and any ``Content-Type`` containing
``application/json``), a test states what must hold in both: what runs is what was weighed.
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

#: What a library's test module takes (``from tests.quotas.graphql.behaviour import *``): the fixtures and every test.
__all__ = [
    "client",
    "plan",
    "test_a_bad_api_key_is_a_graphql_401",
    "test_a_cheap_query_is_answered_with_its_headers",
    "test_a_cost_past_max_request_cost_is_a_400",
    "test_a_document_over_the_byte_bound_is_refused_unparsed",
    "test_a_document_over_the_token_bound_is_refused",
    "test_a_document_too_deep_to_weigh_is_refused",
    "test_a_flood_of_over_cap_queries_meets_the_rate_limit",
    "test_a_get_query_and_a_query_in_the_url_of_a_post_are_weighed",
    "test_a_json_like_content_type_is_weighed_as_run",
    "test_a_method_the_library_refuses_is_an_ordinary_request",
    "test_a_multipart_form_query_field_is_weighed_as_run",
    "test_a_priced_limit_charges_the_budget_by_complexity",
    "test_a_request_with_no_query_is_an_ordinary_request",
    "test_a_syntax_error_is_the_librarys_to_answer",
    "test_a_url_query_with_the_bodys_operation_name_is_weighed_as_run",
    "test_an_expensive_query_spends_its_complexity",
    "test_an_operation_name_alone_in_the_body_is_weighed_as_run",
    "test_an_operation_name_in_the_url_beside_the_bodys_is_weighed_as_run",
    "test_an_operation_the_gate_did_not_weigh_is_refused",
    "test_an_over_complex_query_is_refused_and_spends_one",
    "test_graphiqls_introspection_needs_a_cap_above_the_default",
    "test_introspection_spends_its_fields",
    "test_the_plans_limit_refuses_with_a_graphql_error_and_the_rest_headers",
    "test_the_views_own_cap_replaces_the_setting",
    "test_typename_is_not_free",
    "test_with_quotas_off_the_library_answers_alone",
]

CHEAP = "{ books { title } }"
EXPENSIVE = "{ books { title author { name } } }"
#: Two operations: Cheap (3) fits /graphql-small's cap of 4, Expensive (8) does not.
TWO = "query Cheap { books { title } } query Expensive { books { title author { name } } }"
CHEAP_DATA = {"data": {"books": [{"title": "Dune"}, {"title": "Emma"}]}}


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


def problem_of(response) -> dict:
    """The problem details a GraphQL refusal of ours carries in its one error's ``extensions``."""
    (error,) = json.loads(response.content)["errors"]
    return error["extensions"]


def assert_weighed_as_run(response) -> None:
    """On /graphql-small (cap 4, 100 units), whatever the library runs is what was weighed: a 200 is Cheap's
    answer and spent 3; Expensive (8) is refused by the cap (400 query-too-complex, spending 1); a request the
    library will not run is its own 400, counted as one request. Never Expensive's data, never a weight that
    counts a query the library did not read."""
    assert b"Herbert" not in response.content, response.content
    if response.status_code == 200:
        assert json.loads(response.content) == CHEAP_DATA
        assert ";quotas-weight=3" in response["RateLimit"]
        assert remaining(response) == 97
        return
    assert response.status_code == 400, response.content
    assert remaining(response) == 99
    if response["Content-Type"] == "application/json" and "extensions" in response.content.decode():
        problem = problem_of(response)
        assert (problem["reason"], problem["complexity"], problem["max_complexity"]) == ("query_too_complex", 8, 4)


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
    assert post(client, "{ __typename }").status_code == 200  # 1 unit still fits (__typename counts 1)


def test_an_over_complex_query_is_refused_and_spends_one(client, plan, set_quotas):
    """Over GRAPHQL_MAX_COMPLEXITY: 400, a GraphQL error naming the complexity and the cap. The refusal spends 1
    unit (it was 0 before issue 44: a flood of over-cap queries cost the client nothing), so it carries the
    RateLimit headers."""
    set_quotas(GRAPHQL_MAX_COMPLEXITY=5)
    refused = post(client, EXPENSIVE)
    assert refused.status_code == 400
    assert remaining(refused) == 99
    (error,) = json.loads(refused.content)["errors"]
    problem = error["extensions"]
    assert problem["type"] == "/problems/query-too-complex"
    assert (problem["reason"], problem["complexity"], problem["max_complexity"]) == ("query_too_complex", 8, 5)
    assert error["message"].startswith("This query's complexity is 8; this endpoint answers queries of complexity up")
    assert remaining(post(client, CHEAP)) == 96


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
    """GET ?query= spends its complexity; a POST with a query in its URL and one in its body spends the one the
    library runs (graphene-django the URL's, strawberry the body's), once: not both, as before issue 44."""
    response = client.get("/graphql", {"query": EXPENSIVE})
    assert response.status_code == 200
    assert remaining(response) == 92
    both = client.post(f"/graphql?query={CHEAP}", json.dumps({"query": CHEAP}), content_type="application/json")
    assert both.status_code == 200
    assert remaining(both) == 92 - 3


def test_introspection_spends_its_fields(client, plan):
    """Introspection is weighed like any selection (it was 1 before issue 44, whatever it selected):
    __schema 1, queryType 2, name 3, fields 3, name 4, type 4, name 5, kind 5, ofType 5, name 6, kind 6 = 44."""
    query = "{ __schema { queryType { name fields { name type { name kind ofType { name kind } } } } } }"
    response = post(client, query)
    assert response.status_code == 200
    assert json.loads(response.content)["data"]["__schema"]["queryType"]["name"] == "Query"
    assert remaining(response) == 100 - 44


def test_typename_is_not_free(client, plan):
    """Five __typename (complexity 5, 0 before issue 44) are over /graphql-small's cap of 4: graphql-core's
    validation of repeated fields is quadratic, so a free field was a way to buy seconds of CPU for one unit."""
    refused = post(client, "{ __typename __typename __typename __typename __typename }", path="/graphql-small")
    assert refused.status_code == 400
    assert problem_of(refused)["complexity"] == 5
    response = post(client, "{ books { __typename } }")
    assert response.status_code == 200
    assert ";quotas-weight=3" in response["RateLimit"]


def test_graphiqls_introspection_needs_a_cap_above_the_default(client, db, set_quotas):
    """graphql-core's introspection query (what GraphiQL sends) weighs 1754: over the default cap of 1000 it is
    the 400; under a cap of 2000 (docs/graphql.md's advice) it is answered and spends 1754."""
    from graphql import get_introspection_query

    big = PlanFactory(slug="big", is_default=True)
    EndpointLimitFactory(plan=big, name="graph", rates="10000/min", algorithm="fixed_window")
    refused = post(client, get_introspection_query())
    assert refused.status_code == 400
    assert problem_of(refused)["complexity"] == 1754
    set_quotas(GRAPHQL_MAX_COMPLEXITY=2000)
    response = post(client, get_introspection_query())
    assert response.status_code == 200
    assert json.loads(response.content)["data"]["__schema"]["queryType"]["name"] == "Query"
    assert ";quotas-weight=1754" in response["RateLimit"]


def test_a_request_with_no_query_is_an_ordinary_request(client, plan):
    """A GET without a query (GraphiQL's page, or the library's "no query" error) spends the limit's own weight."""
    response = client.get("/graphql")
    assert response.status_code < 500
    assert remaining(response) == 99


def test_a_method_the_library_refuses_is_an_ordinary_request(client, plan):
    """A PUT carrying a query: the library answers 405 without running it, so it is counted as one request,
    not by the complexity of a query that never runs."""
    response = client.put("/graphql", json.dumps({"query": EXPENSIVE}), content_type="application/json")
    assert response.status_code == 405
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


def test_a_document_too_deep_to_weigh_is_refused(client, plan, set_quotas):
    """Fragments spreading each other thousands deep: 400 query-too-complex without a figure, not a 500; it
    spends 1. (Its 106 kB and 21,000 tokens are over the defaults of GRAPHQL_MAX_QUERY_BYTES and
    GRAPHQL_MAX_TOKENS, which would refuse it first.)"""
    set_quotas(GRAPHQL_MAX_QUERY_BYTES=200_000, GRAPHQL_MAX_TOKENS=50_000)
    fragments = ["fragment F0 on Book { title }"]
    fragments += [f"fragment F{i} on Book {{ ...F{i - 1} }}" for i in range(1, 3000)]
    refused = post(client, " ".join(fragments) + " { books { ...F2999 } }")
    assert refused.status_code == 400
    problem = json.loads(refused.content)["errors"][0]["extensions"]
    assert (problem["reason"], problem["complexity"]) == ("query_too_complex", None)
    assert problem["detail"].startswith("This query nests fields or fragments too deeply to be weighed")
    assert remaining(refused) == 99


# Issue 44, item 1: the operation weighed is the one the library runs, wherever the request puts its parts.


def test_a_url_query_with_the_bodys_operation_name_is_weighed_as_run(client, plan):
    """Two operations in the URL's query, a body naming Expensive beside a one-operation query: graphene-django
    runs the URL's Expensive (before issue 44: answered 200, weighed 2); strawberry runs the body's query,
    which has no Expensive (its own 400, counted once, not twice)."""
    body = json.dumps({"query": "query Cheap { books { title } }", "operationName": "Expensive"})
    response = client.post(f"/graphql-small?query={TWO}", body, content_type="application/json")
    assert_weighed_as_run(response)


def test_an_operation_name_alone_in_the_body_is_weighed_as_run(client, plan):
    """The body is only {"operationName": "Expensive"}, the operations are in the URL: graphene-django runs
    Expensive; strawberry finds no query in the body (its 400, one request)."""
    body = json.dumps({"operationName": "Expensive"})
    response = client.post(f"/graphql-small?query={TWO}", body, content_type="application/json")
    assert_weighed_as_run(response)


def test_a_multipart_form_query_field_is_weighed_as_run(client, plan):
    """A multipart form with a plain ``query`` field: graphene-django runs it (before issue 44 the gate read
    only a multipart body's ``operations``); strawberry runs no form (its 400)."""
    response = client.post("/graphql-small", {"query": EXPENSIVE})
    assert_weighed_as_run(response)


def test_an_operation_name_in_the_url_beside_the_bodys_is_weighed_as_run(client, plan):
    """?operationName=Expensive in the URL, a body naming Cheap: graphene-django takes the URL's name and runs
    Expensive (before issue 44 the gate weighed Cheap); strawberry takes the body's and runs Cheap."""
    body = json.dumps({"query": TWO, "operationName": "Cheap"})
    response = client.post("/graphql-small?operationName=Expensive", body, content_type="application/json")
    assert_weighed_as_run(response)


@pytest.mark.parametrize("content_type", ["application/json5", "application/jsonx", "application/json-patch"])
def test_a_json_like_content_type_is_weighed_as_run(client, plan, content_type):
    """strawberry runs a JSON body under any Content-Type that contains ``application/json`` (before issue 44
    the gate read only ``application/json`` itself); graphene-django reads none of these (its 400)."""
    response = client.post("/graphql-small", json.dumps({"query": EXPENSIVE}), content_type=content_type)
    assert_weighed_as_run(response)


def test_an_operation_the_gate_did_not_weigh_is_refused(client, plan):
    """Defence in depth: a view that runs another document than the one its request was weighed by (here one
    that swaps the query on its way to execution) is refused at execution: 400 query-not-weighed as a GraphQL
    error, nothing run; the request keeps what it was charged (3)."""
    refused = post(client, CHEAP, path="/graphql-drifting")
    assert refused.status_code == 400, refused.content
    assert b"Herbert" not in refused.content
    problem = problem_of(refused)
    assert (problem["type"], problem["reason"]) == ("/problems/query-not-weighed", "query_not_weighed")
    assert remaining(refused) == 97


# Issue 44, item 3: a document is bounded before it is parsed, and a refusal for its size or complexity spends 1.


def test_a_document_over_the_byte_bound_is_refused_unparsed(client, plan):
    """A 150 kB document (a 3-field query and a long comment) is over GRAPHQL_MAX_QUERY_BYTES (100,000 by
    default): 400 query-too-complex, reason query_too_large, naming the size and the bound, with no complexity
    (it was not parsed); it spends 1."""
    query = CHEAP + "\n#" + "x" * 150_000
    refused = post(client, query)
    assert refused.status_code == 400
    problem = problem_of(refused)
    assert (problem["reason"], problem["bound"], problem["maximum"]) == ("query_too_large", "bytes", 100_000)
    assert problem["size"] == len(query.encode())
    assert problem["complexity"] is None
    assert "GRAPHQL_MAX_QUERY_BYTES" in problem["detail"]
    assert remaining(refused) == 99


def test_a_document_over_the_token_bound_is_refused(client, plan, set_quotas):
    """GRAPHQL_MAX_TOKENS = 5: the 10 tokens of { books { title author { name } } } stop the parse at the
    sixth; 400 query_too_large naming the bound; it spends 1. With 10 allowed, it runs."""
    set_quotas(GRAPHQL_MAX_TOKENS=5)
    refused = post(client, EXPENSIVE)
    assert refused.status_code == 400
    problem = problem_of(refused)
    assert (problem["reason"], problem["bound"], problem["maximum"], problem["size"]) == (
        "query_too_large", "tokens", 5, None
    )  # fmt: skip
    assert "GRAPHQL_MAX_TOKENS" in problem["detail"]
    assert remaining(refused) == 99
    set_quotas(GRAPHQL_MAX_TOKENS=10)
    assert post(client, EXPENSIVE).status_code == 200


def test_a_flood_of_over_cap_queries_meets_the_rate_limit(client, db):
    """3 units a minute: three over-cap queries are each a 400 spending 1 (r 2, 1, 0); the fourth, and a
    too-large document after it, are the client's 429, not another 400."""
    small = PlanFactory(slug="small", is_default=True)
    EndpointLimitFactory(plan=small, name="graph", rates="3/min", algorithm="fixed_window")
    for left in (2, 1, 0):
        refused = post(client, EXPENSIVE, path="/graphql-small")
        assert refused.status_code == 400
        assert remaining(refused) == left
    for query in (EXPENSIVE, CHEAP + "#" * 150_000):
        limited = post(client, query, path="/graphql-small")
        assert limited.status_code == 429
        assert problem_of(limited)["reason"] == "rate_limited"
