"""The Redis client the engine talks to, built from one URL.

``redis://``, ``rediss://`` and ``unix://`` give a plain client with a
connection pool (redis-py's own URL parsing).
"""

from __future__ import annotations

from typing import Any

import redis


def connect(url: str, timeout: float) -> Any:
    """A Redis client for ``url`` whose connects and reads give up after ``timeout`` seconds."""
    return redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
