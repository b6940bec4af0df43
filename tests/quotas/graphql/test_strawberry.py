"""A strawberry endpoint behind QuotaGraphQLView (skipped where strawberry-graphql-django is not installed)."""

import json

import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient, RequestFactory

from tests.conftest import import_extra

import_extra("strawberry_django")

from quotas.runtime import get_runtime  # noqa: E402
from tests.doc_blocks import doc_block  # noqa: E402
from tests.factories import EndpointLimitFactory, PlanFactory  # noqa: E402
from tests.quotas.graphql.behaviour import (  # noqa: E402
    EXPENSIVE,
    client,
    docs_module,
    plan,
    post,
    remaining,
    test_a_bad_api_key_is_a_graphql_401,
    test_a_cheap_query_is_answered_with_its_headers,
    test_a_cost_past_max_request_cost_is_a_400,
    test_a_document_too_deep_to_weigh_is_refused,
    test_a_get_query_and_a_query_in_the_url_of_a_post_are_weighed,
    test_a_priced_limit_charges_the_budget_by_complexity,
    test_a_request_with_no_query_is_an_ordinary_request,
    test_a_syntax_error_is_the_librarys_to_answer,
    test_an_expensive_query_spends_its_complexity,
    test_an_over_complex_query_is_refused_before_anything_is_spent,
    test_introspection_spends_one,
    test_the_plans_limit_refuses_with_a_graphql_error_and_the_rest_headers,
    test_the_views_own_cap_replaces_the_setting,
    test_with_quotas_off_the_library_answers_alone,
)

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.quotas.graphql.strawberry_urls")]

__all__ = [
    "client",
    "plan",
    "test_a_bad_api_key_is_a_graphql_401",
    "test_a_cheap_query_is_answered_with_its_headers",
    "test_a_cost_past_max_request_cost_is_a_400",
    "test_a_document_too_deep_to_weigh_is_refused",
    "test_a_get_query_and_a_query_in_the_url_of_a_post_are_weighed",
    "test_a_priced_limit_charges_the_budget_by_complexity",
    "test_a_request_with_no_query_is_an_ordinary_request",
    "test_a_syntax_error_is_the_librarys_to_answer",
    "test_an_expensive_query_spends_its_complexity",
    "test_an_over_complex_query_is_refused_before_anything_is_spent",
    "test_introspection_spends_one",
    "test_the_plans_limit_refuses_with_a_graphql_error_and_the_rest_headers",
    "test_the_views_own_cap_replaces_the_setting",
    "test_with_quotas_off_the_library_answers_alone",
]


def test_the_docs_snippet_serves_a_limited_endpoint(plan, monkeypatch):
    """docs/graphql.md's strawberry snippet, run as written: { hello } is answered and spends 1."""
    urls = docs_module(monkeypatch, "docs_strawberry_urls", doc_block("graphql.md", "strawberry-urls"))
    view = urls.urlpatterns[0].callback
    request = RequestFactory().post("/graphql", json.dumps({"query": "{ hello }"}), content_type="application/json")
    response = view(request)
    assert response.status_code == 200
    assert json.loads(response.content) == {"data": {"hello": "world"}}
    assert remaining(response) == 99


def test_a_strawberry_django_field_spends_its_complexity(client, plan):
    """{ plans { slug name } } reads the plans app's models through strawberry-django: complexity 5."""
    response = post(client, "{ plans { slug name } }")
    assert response.status_code == 200
    assert json.loads(response.content) == {"data": {"plans": [{"slug": "free", "name": "Free"}]}}
    assert remaining(response) == 95


# No async test plugin is installed: each ASGI scenario runs in an event loop of its own (async_to_sync).


def test_the_async_view_spends_complexity_and_refuses_like_the_sync_one(db):
    """QuotaAsyncGraphQLView under ASGI, 10 units a minute and a cap of 10: a query of 8 passes with its headers,
    the next is the GraphQL 429 with Retry-After, and one of complexity 11 is the 400 before anything is spent."""
    small = PlanFactory(slug="small", is_default=True)
    EndpointLimitFactory(plan=small, name="graph", rates="10/min", algorithm="fixed_window")
    over_cap = "{ books { title author { name } } more: books { title } }"  # 8 + 3 = 11

    async def scenario():
        client = AsyncClient(raise_request_exception=False)
        body = json.dumps({"query": EXPENSIVE})
        first = await client.post("/agraphql", body, content_type="application/json")
        assert first.status_code == 200
        assert json.loads(first.content)["data"]["books"][1] == {"title": "Emma", "author": {"name": "Austen"}}
        assert remaining(first) == 2
        refused = await client.post("/agraphql", body, content_type="application/json")
        assert refused.status_code == 429
        assert int(refused["Retry-After"]) >= 1
        assert remaining(refused) == 2
        assert json.loads(refused.content)["errors"][0]["extensions"]["reason"] == "rate_limited"
        capped = await client.post("/agraphql", json.dumps({"query": over_cap}), content_type="application/json")
        assert capped.status_code == 400
        assert json.loads(capped.content)["errors"][0]["extensions"]["complexity"] == 11
        await get_runtime().store.transport.aclose()

    async_to_sync(scenario)()
