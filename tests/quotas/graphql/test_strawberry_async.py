"""strawberry's AsyncGraphQLView behind QuotaAsyncGraphQLView, under ASGI: every shared behaviour test
(behaviour.py) through Django's AsyncClient (skipped where strawberry-graphql-django is not installed)."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient

from tests.conftest import import_extra

import_extra("strawberry_django")

from quotas.engine import default_engine  # noqa: E402
from tests.quotas.graphql.behaviour import *  # noqa: E402, F403  (the shared tests and their fixtures)
from tests.quotas.graphql.csrf_behaviour import *  # noqa: E402, F403  (the CSRF tests, issue 45)

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.quotas.graphql.strawberry_async_urls")]


class ASGIClient:
    """Django's AsyncClient behind the sync test client's ``get``, ``post`` and ``put``, so the shared tests run
    unchanged. No async test plugin is installed: each request runs in an event loop of its own (async_to_sync),
    which closes its Redis client before it ends. ``HTTP_*`` keywords become headers (an ASGI scope has no
    META); ``cookies`` and ``force_login`` are the AsyncClient's (csrf_behaviour.py signs a browser in)."""

    def __init__(self, **options: Any) -> None:
        self.client = AsyncClient(raise_request_exception=False, **options)

    @property
    def cookies(self):
        return self.client.cookies

    def force_login(self, user: Any) -> None:
        self.client.force_login(user)

    def get(self, path: str, data: Any = None, **extra: Any):
        return self._send("get", path, data, extra)

    def post(self, path: str, data: Any = None, content_type: str | None = None, **extra: Any):
        if content_type is not None:
            extra["content_type"] = content_type
        return self._send("post", path, data, extra)

    def put(self, path: str, data: Any = None, content_type: str | None = None, **extra: Any):
        if content_type is not None:
            extra["content_type"] = content_type
        return self._send("put", path, data, extra)

    def _send(self, method: str, path: str, data: Any, extra: dict[str, Any]):
        headers = {k.removeprefix("HTTP_").replace("_", "-"): v for k, v in extra.items() if k.startswith("HTTP_")}
        kwargs = {k: v for k, v in extra.items() if not k.startswith("HTTP_")}

        async def send():
            try:
                return await getattr(self.client, method)(path, data, headers=headers, **kwargs)
            finally:
                await default_engine.runtime().store.transport.aclose()

        return async_to_sync(send)()


@pytest.fixture
def client(set_quotas) -> ASGIClient:  # replaces behaviour.py's sync client
    # Every request connects afresh (an event loop of its own): on a machine whose cores are busy with other
    # test runs, CONNECT_TIMEOUT's 50 ms is sometimes too short for that, and the breaker then opens.
    set_quotas(CONNECT_TIMEOUT=1.0)
    return ASGIClient()


@pytest.fixture
def browser(set_quotas) -> ASGIClient:  # replaces csrf_behaviour.py's sync browser
    set_quotas(CONNECT_TIMEOUT=1.0)
    return ASGIClient(enforce_csrf_checks=True)
