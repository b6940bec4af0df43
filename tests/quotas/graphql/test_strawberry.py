"""A strawberry endpoint behind QuotaGraphQLView (skipped where strawberry-graphql-django is not installed)."""

import json

import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient, RequestFactory

from tests.conftest import import_extra

import_extra("strawberry_django")

from quotas.engine import default_engine  # noqa: E402
from tests.doc_blocks import doc_block  # noqa: E402
from tests.factories import EndpointLimitFactory, PlanFactory  # noqa: E402
from tests.quotas.graphql.behaviour import *  # noqa: E402, F403  (the shared tests and their fixtures)
from tests.quotas.graphql.behaviour import EXPENSIVE, docs_module, post, remaining  # noqa: E402
from tests.quotas.graphql.csrf_behaviour import *  # noqa: E402, F403  (the CSRF tests, issue 45)
from tests.quotas.graphql.csrf_behaviour import assert_docs_snippet_handles_csrf  # noqa: E402

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.quotas.graphql.strawberry_urls")]


def test_the_docs_snippet_serves_a_limited_endpoint(plan, monkeypatch):
    """docs/graphql.md's strawberry snippet, run as written: { hello } is answered and spends 1."""
    urls = docs_module(monkeypatch, "docs_strawberry_urls", doc_block("graphql.md", "strawberry-urls"))
    view = urls.urlpatterns[0].callback
    request = RequestFactory().post("/graphql", json.dumps({"query": "{ hello }"}), content_type="application/json")
    response = view(request)
    assert response.status_code == 200
    assert json.loads(response.content) == {"data": {"hello": "world"}}
    assert remaining(response) == 99


def test_the_docs_snippet_handles_csrf_without_csrf_exempt(plan, monkeypatch, settings, signed_in):
    """docs/graphql.md's strawberry snippet as urls.py: a signed-in browser needs its CSRF token, an API key client
    none (before issue 45 the snippet wrapped the view in csrf_exempt)."""
    source = doc_block("graphql.md", "strawberry-urls")
    assert_docs_snippet_handles_csrf(monkeypatch, settings, signed_in, plan, "docs_strawberry_urls", source)


def test_a_strawberry_django_field_spends_its_complexity(client, plan):
    """{ plans { slug name } } reads the plans app's models through strawberry-django: complexity 5."""
    response = post(client, "{ plans { slug name } }")
    assert response.status_code == 200
    assert json.loads(response.content) == {"data": {"plans": [{"slug": "free", "name": "Free"}]}}
    assert remaining(response) == 95


# No async test plugin is installed: each ASGI scenario runs in an event loop of its own (async_to_sync).


def test_the_async_view_spends_complexity_and_refuses_like_the_sync_one(db):
    """QuotaAsyncGraphQLView under ASGI, 10 units a minute and a cap of 10: a query of 8 passes with its headers,
    the next is the GraphQL 429 with Retry-After, and one of complexity 11 is the 400, spending 1 of the 2 left."""
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
        assert remaining(capped) == 1
        await default_engine.runtime().store.transport.aclose()

    async_to_sync(scenario)()
