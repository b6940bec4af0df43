"""The Redis client under a runtime's store, for tests that look at what the store wrote.

The product reaches Redis only through the store and its parts (``tests/test_layout.py``); a test may read
the keys themselves, so it takes the client the store's transport sends on.
"""

from __future__ import annotations

from typing import Any

from quotas.settings import quota_settings
from quotas.store.controller_board import ControllerBoard


def client_of(runtime: Any) -> Any:
    """The redis-py client (or the memory store's) that ``runtime``'s store sends on."""
    return runtime.store.transport.client


def board_of(client: Any) -> ControllerBoard:
    """The adaptive controller's board over ``client`` (a test's own Redis client), under ``KEY_PREFIX``."""
    return ControllerBoard(client, str(quota_settings.KEY_PREFIX))
