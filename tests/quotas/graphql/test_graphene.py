"""A graphene-django endpoint behind QuotaGraphQLView (skipped where graphene-django is not installed)."""

import json

import pytest
from django.test import RequestFactory

from tests.conftest import import_extra

import_extra("graphene_django")

from tests.doc_blocks import doc_block  # noqa: E402
from tests.quotas.graphql.behaviour import (  # noqa: E402
    CHEAP,
    EXPENSIVE,
    client,
    docs_module,
    plan,
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

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.quotas.graphql.graphene_urls")]

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
    """docs/graphql.md's graphene snippet, run as written: { hello } is answered and spends 1."""
    urls = docs_module(monkeypatch, "docs_graphene_urls", doc_block("graphql.md", "graphene-urls"))
    view = urls.urlpatterns[0].callback
    request = RequestFactory().post("/graphql", json.dumps({"query": "{ hello }"}), content_type="application/json")
    response = view(request)
    assert response.status_code == 200
    assert json.loads(response.content) == {"data": {"hello": "world"}}
    assert remaining(response) == 99


def test_a_batch_spends_the_sum_of_its_operations(client, plan):
    """graphene-django's batching: [cheap (3), expensive (8)] runs both and spends 11."""
    batch = [{"id": 1, "query": CHEAP}, {"id": 2, "query": EXPENSIVE}]
    response = client.post("/graphql-batch", json.dumps(batch), content_type="application/json")
    assert response.status_code == 200
    assert [item["id"] for item in json.loads(response.content)] == [1, 2]
    assert remaining(response) == 100 - 11
