"""A Redis client on the store a runtime decides on, for tests that look at what the store wrote.

The product reaches Redis only through the store and its parts, and neither the store nor its transport hands
out the client they send on (``tests/test_layout.py``); a test that reads the keys themselves opens its own
client on the same ``REDIS_URL``, as an operator's ``redis-cli`` would.
"""

from __future__ import annotations

from typing import Any

from quotas.formats.store_urls import is_memory_url
from quotas.settings import quota_settings
from quotas.store.backends.connect import connect
from quotas.store.controller_board import ControllerBoard

#: Seconds a test's own client waits for Redis (longer than the engine's: a test reads, it does not decide).
TIMEOUT = 5.0
#: The tests' own clients, by URL: one connection pool each for the whole session.
_clients: dict[str, Any] = {}


def client_of(runtime: Any) -> Any:
    """A client of the Redis (or the memory store's keyspace) ``runtime``'s store sends on: the test's own, on
    the ``REDIS_URL`` the runtime was built from."""
    url = str(quota_settings.REDIS_URL)
    if is_memory_url(url):  # the keyspace the URL names now (a test may have dropped the last one)
        return connect(url, TIMEOUT)
    client = _clients.get(url)
    if client is None:
        client = _clients[url] = connect(url, TIMEOUT)
    return client


def board_of(client: Any) -> ControllerBoard:
    """The adaptive controller's board over ``client`` (a test's own Redis client), under ``KEY_PREFIX``."""
    return ControllerBoard(client, str(quota_settings.KEY_PREFIX))
