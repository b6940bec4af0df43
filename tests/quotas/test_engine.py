"""The Engine: what the front doors hold, two of them in one process, and no module state on the request path."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings
from rest_framework.response import Response
from rest_framework.test import APIClient, APIRequestFactory
from rest_framework.views import APIView

from quotas.clock import ManualClock
from quotas.django.middleware import PathQuotaMiddleware
from quotas.engine import Engine, default_engine
from quotas.settings import QuotaSettings
from quotas.throttling import QuotaThrottle
from tests.conftest import import_extra
from tests.factories import EndpointLimitFactory, PlanFactory, issue_key

pytestmark = pytest.mark.django_db


class ThreeAMinute(QuotaThrottle):
    """One DRF-style throttle: 3 requests a minute per client."""

    rate = "3/min"


class CountedView(APIView):
    throttle_classes = [ThreeAMinute]

    def get(self, request):
        return Response({"ok": True})


def statuses(n: int) -> list[int]:
    view = CountedView.as_view()
    return [view(APIRequestFactory().get("/counted", REMOTE_ADDR="203.0.113.9")).status_code for _ in range(n)]


@pytest.fixture
def other_engine(fresh_redis, settings) -> Iterator[Engine]:
    """A second engine in this process: the same Redis under another key prefix, on a clock of its own."""
    engine = Engine(
        clock=ManualClock(default_engine.clock.now()),
        settings=QuotaSettings({**settings.QUOTAS, "KEY_PREFIX": "other-engine"}),
    )
    yield engine
    engine.reset()


def test_every_front_door_holds_the_process_engine_unless_told_otherwise():
    """As DRF's throttles hold ``cache`` and ``timer``: a class attribute with a documented default."""
    assert QuotaThrottle.engine is default_engine
    assert PathQuotaMiddleware.engine is default_engine
    views = import_extra("quotas.graphql.views")  # GraphQL is an extra (the library matrix installs none)
    assert views.QuotaGraphQLOptions.quota_engine is default_engine


def test_two_engines_keep_their_own_counters_and_clocks(quota_clock, other_engine, monkeypatch):
    """The same throttle class, handed another engine, counts on that engine's store and moves with its clock
    only: the process's engine is untouched by either."""
    assert statuses(4) == [200, 200, 200, 429]
    monkeypatch.setattr(ThreeAMinute, "engine", other_engine)
    assert statuses(4) == [200, 200, 200, 429]  # its own counters, under its own prefix
    other_engine.clock.advance(60)  # type: ignore[attr-defined]  # a ManualClock
    assert statuses(1) == [200]
    monkeypatch.setattr(ThreeAMinute, "engine", default_engine)
    assert statuses(1) == [429]  # the process's engine did not see that minute pass
    quota_clock.advance(60)
    assert statuses(1) == [200]
    assert other_engine.runtime() is not default_engine.runtime()
    assert other_engine.runtime().store.prefix != default_engine.runtime().store.prefix


def test_a_setting_change_resets_every_engine(other_engine):
    """``QUOTAS`` changing rebuilds each engine's runtime on the next use, as it does the process's."""
    before = other_engine.runtime(), default_engine.runtime()
    with override_settings(QUOTAS={"RULES_CHECK_INTERVAL": 0}):
        assert other_engine.ready is None
        assert default_engine.ready is None
        assert other_engine.runtime() is not before[0]


# --- No module state on the request path -------------------------------------------------------------------------

#: The module-level containers of ``quotas`` that requests may change, and why each is process-wide on purpose
#: (docs/architecture.md, "Process-wide registries"). Everything else a request touches lives on its engine.
DOCUMENTED_REGISTRIES: dict[str, str] = {
    "quotas.metrics._decision_children": "Prometheus's metrics are the process's, whichever engine decided",
    "quotas.metrics._raw_children": "the same children by the caller's raw labels",
    "quotas.metrics._warned": "unknown metric labels warned about once per process",
    "quotas.observability.record._entries": "the process's metrics ledger (LEDGER.entries), folded into the "
    "metrics and into the history each entry names by its serial",
    "quotas.store.backends.memory.client._keyspaces": "memory:// stores by name: one per URL, as a Redis is one "
    "per address, shared by every engine that names it",
}


def module_containers() -> dict[str, Any]:
    """Every dict, list and set held by a module-level name of a ``quotas`` module imported so far (walking the
    package would import modules with effects of their own: quotas.gunicorn is gunicorn's configuration)."""
    found: dict[str, Any] = {}
    for name, module in list(sys.modules.items()):
        if name == "quotas" or name.startswith("quotas."):
            for attr, value in vars(module).items():
                if isinstance(value, dict | list | set) and not attr.startswith("__"):
                    found[f"{name}.{attr}"] = value
    return found


def contents(value: Any) -> Any:
    return list(value.items()) if isinstance(value, dict) else list(value)


@pytest.mark.urls("tests.urls")
def test_requests_change_no_module_state_but_documented_registries(set_quotas, settings, django_user_model):
    """Requests through every front door (the DRF throttle with an API key, a user and an address, a plain view
    behind ``@quota_limited``, PathQuotaMiddleware), their settling and the poller's tick leave every module-level
    dict, list and set of ``quotas`` as it was, but the documented registries. (GraphQL's views answer through
    the same gate as ``@quota_limited``.)"""
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, "quotas.django.middleware.PathQuotaMiddleware"]
    set_quotas(PATH_LIMITS=[{"prefix": "/t/plain-search", "scope": "search"}])
    plan = PlanFactory(slug="engine-state", is_default=True)
    EndpointLimitFactory(plan=plan, name="all", rates="100/min")

    def traffic(name: str) -> None:
        api = APIClient()
        assert api.get("/t/priced", HTTP_X_API_KEY=issue_key(plan=plan)).status_code == 200
        assert api.get("/t/scoped").status_code == 200
        assert api.get("/t/plain-search?q=x").status_code == 200
        api.force_authenticate(django_user_model.objects.create_user(name, password="x"))
        assert api.get("/t/whoami").status_code == 200

    traffic("first")  # every module the requests need is imported
    containers = module_containers()
    before = {name: contents(value) for name, value in containers.items()}
    traffic("second")  # another key, another user: what a module-level memo of clients would keep
    default_engine.runtime().tick()
    changed = sorted(
        name
        for name, value in containers.items()
        if contents(value) != before[name] and name not in DOCUMENTED_REGISTRIES
    )
    assert changed == []
