"""A Redis client whose server is not there, for tests of what a failed write keeps."""

from __future__ import annotations

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from config.embedded_redis import free_port


def unreachable_redis() -> redis.Redis:
    """A client of a loopback port nothing listens on, that fails at the first refused connection (redis-py's
    default retries with backoff would take seconds to say the same)."""
    return redis.Redis(port=free_port(), socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0))
