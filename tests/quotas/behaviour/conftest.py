"""The behaviour suite: every test in this folder runs on every store (tests/conftest.py's STORES).

The memory store runs the Lua library itself, so what these tests hold it to is everything around the
scripts: the keyspace's commands, expiry and replies, the struct formats, the conversions between Lua and
Python, and the readers (usage, standing) that go through its client.
"""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.store_client import client_of


@pytest.fixture(autouse=True)
def runtime(store_runtime: Any) -> Any:
    """The engine on Redis 7, Redis 6.2 and the memory store in turn (every test here takes each)."""
    return store_runtime


@pytest.fixture
def redis_client(runtime: Any) -> Any:
    """The client of the store the test decides on: what a test reads back is that store's."""
    return client_of(runtime)


@pytest.fixture
def client() -> Any:
    """An HTTP client that answers a view's error with its 500 response, as a user sees it, not by raising."""
    return APIClient(raise_request_exception=False)
