"""The store of a ``REDIS_URL``: the client and transport the URL names, and the store over them; what the
system checks ask of the URL, and what they and the test helpers ask of the memory store; and the refusal of the
memory store by a production process (quotas.E091's condition, enforced where a store is opened and where a server
or a Celery process starts).
"""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings
from django.core import mail
from django.core.exceptions import ImproperlyConfigured

from quotas.clock import SYSTEM_CLOCK, Clock
from quotas.contract.library import LibraryCaller
from quotas.formats.store_urls import is_memory_url
from quotas.settings import quota_settings
from quotas.store.backends.connect import async_connector, connect, standalone_problem
from quotas.store.backends.memory import MemoryRedis, MemoryTransport, keyspace, lua_available
from quotas.store.backends.memory.keyspace import Keyspace
from quotas.store.redis_store import RedisStore
from quotas.store.transport import Transport

#: What a production process on the memory store says as it refuses to start: one line, naming the way out.
MEMORY_STORE_REFUSED = (
    "QUOTAS['REDIS_URL'] is memory:// with DEBUG off: each process would count alone (N processes admit N times "
    "each limit and budget) and forget on restart. Point REDIS_URL at a Redis, or set "
    "QUOTAS['ALLOW_MEMORY_STORE_IN_PRODUCTION'] = True for a single process that may forget (quotas.E091)."
)


def open_store(
    url: str, prefix: str, buckets: int, timeout: float, connect_timeout: float, *, clock: Clock = SYSTEM_CLOCK
) -> RedisStore:
    """The store of ``url``: Redis (standalone, Sentinel or Cluster) through the transport, or the memory store
    run in this process, its keyspace's time (key expiry, ``TIME``) an injected ``clock``'s. Raises
    :class:`~quotas.exceptions.StoreUnavailable` when a cluster's startup nodes do not answer, ``ValueError`` for
    a malformed URL, and ``ImproperlyConfigured`` for the memory store in production (see
    :func:`refuse_memory_store_in_production`)."""
    refuse_memory_store_in_production(url)
    client = connect(url, timeout, connect_timeout)
    transport: LibraryCaller
    if isinstance(client, MemoryRedis):
        # An injected clock is the decisions' own, and so the server's; else the server keeps the real time, as a
        # Redis does whatever an application host's clock says.
        keyspace(url).clock = clock.now if clock.injected else time.time
        transport = MemoryTransport(client)
    else:
        transport = Transport(client, async_connector(url, timeout, connect_timeout))
    return RedisStore(transport, client, prefix, buckets, clock)


def url_problem(url: str) -> str | None:
    """What redis-py refuses in a one-server ``url`` (an option's value, the scheme's case), for the system check
    quotas.E002: :func:`~quotas.store.backends.connect.standalone_problem`, for the checks above the store."""
    return standalone_problem(url)


def memory_store_available() -> bool:
    """Whether the memory store can run here: ``lupa``, which runs the Lua library in process, is installed."""
    return lua_available()


def memory_keyspace(url: str) -> Keyspace:
    """The memory store's keyspace ``url`` (``memory://[<name>]``) names, whose ``clock`` a test may replace."""
    return keyspace(url)


def running_tests() -> bool:
    """Whether Django's test environment is set up (its test runner, pytest-django): it gives mail an outbox."""
    return hasattr(mail, "outbox")


def memory_store_refused(url: Any) -> bool:
    """Whether this process may not run on ``url`` (quotas.E091's condition): the memory store, with ``DEBUG``
    off, outside tests, and ``QUOTAS['ALLOW_MEMORY_STORE_IN_PRODUCTION']`` not ``True``."""
    if not is_memory_url(str(url)) or settings.DEBUG or running_tests():
        return False
    return quota_settings.ALLOW_MEMORY_STORE_IN_PRODUCTION is not True


def refuse_memory_store_in_production(url: Any = None) -> None:
    """Raise ``ImproperlyConfigured`` (:data:`MEMORY_STORE_REFUSED`) when :func:`memory_store_refused` holds for
    ``url`` (default ``QUOTAS['REDIS_URL']``).

    The system check alone stops ``manage.py check`` and ``migrate`` but not a server: gunicorn runs no checks,
    and Celery's worker runs them without heeding the result. So the store refuses to open, and the quota
    middleware (built as a server loads the application) and Celery's worker and beat (:mod:`quotas.startup`)
    ask at start.
    """
    if memory_store_refused(quota_settings.REDIS_URL if url is None else url):
        raise ImproperlyConfigured(MEMORY_STORE_REFUSED)
