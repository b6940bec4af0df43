"""A graphene-django endpoint behind QuotaGraphQLView (skipped where graphene-django is not installed)."""

import json

import pytest
from django.test import RequestFactory

from tests.conftest import import_extra

import_extra("graphene_django")

from tests.doc_blocks import doc_block  # noqa: E402
from tests.quotas.graphql.behaviour import *  # noqa: E402, F403  (the shared tests and their fixtures)
from tests.quotas.graphql.behaviour import CHEAP, EXPENSIVE, docs_module, remaining  # noqa: E402
from tests.quotas.graphql.csrf_behaviour import *  # noqa: E402, F403  (the CSRF tests, issue 45)
from tests.quotas.graphql.csrf_behaviour import assert_docs_snippet_handles_csrf  # noqa: E402

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.quotas.graphql.graphene_urls")]


def test_the_docs_snippet_serves_a_limited_endpoint(plan, monkeypatch):
    """docs/graphql.md's graphene snippet, run as written: { hello } is answered and spends 1."""
    urls = docs_module(monkeypatch, "docs_graphene_urls", doc_block("graphql.md", "graphene-urls"))
    view = urls.urlpatterns[0].callback
    request = RequestFactory().post("/graphql", json.dumps({"query": "{ hello }"}), content_type="application/json")
    response = view(request)
    assert response.status_code == 200
    assert json.loads(response.content) == {"data": {"hello": "world"}}
    assert remaining(response) == 99


def test_the_docs_snippet_handles_csrf_without_csrf_exempt(plan, monkeypatch, settings, signed_in):
    """docs/graphql.md's graphene snippet as urls.py: a signed-in browser needs its CSRF token, an API key client
    none (before issue 45 the snippet wrapped the view in csrf_exempt)."""
    source = doc_block("graphql.md", "graphene-urls")
    assert_docs_snippet_handles_csrf(monkeypatch, settings, signed_in, plan, "docs_graphene_urls", source)


def test_a_batch_spends_the_sum_of_its_operations(client, plan):
    """graphene-django's batching: [cheap (3), expensive (8)] runs both and spends 11."""
    batch = [{"id": 1, "query": CHEAP}, {"id": 2, "query": EXPENSIVE}]
    response = client.post("/graphql-batch", json.dumps(batch), content_type="application/json")
    assert response.status_code == 200
    assert [item["id"] for item in json.loads(response.content)] == [1, 2]
    assert remaining(response) == 100 - 11


def test_a_url_query_runs_for_every_item_of_a_batch_and_is_weighed_so(client, plan):
    """graphene-django runs a batch's every item with the URL's query when there is one: two items under
    ?query=<complexity 8> run it twice and spend 16 (before issue 44: 8 + the items' own 3 + 3 = 14)."""
    batch = [{"id": 1, "query": CHEAP}, {"id": 2, "query": CHEAP}]
    response = client.post(f"/graphql-batch?query={EXPENSIVE}", json.dumps(batch), content_type="application/json")
    assert response.status_code == 200
    assert [item["data"]["books"][0]["author"] for item in json.loads(response.content)] == [{"name": "Herbert"}] * 2
    assert ";quotas-weight=16" in response["RateLimit"]
