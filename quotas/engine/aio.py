"""The decision from asyncio: :meth:`Engine.decide`'s call, sent by redis-py's asyncio client.

The same call (the library's ``decide``, by FCALL or EVALSHA as
:class:`~quotas.engine.scripts.AsyncLuaScript` finds the server can), the same keys and arguments
(:meth:`~quotas.engine.core.Engine.prepare_decide`) and the same reading of
the reply (:meth:`~quotas.engine.core.Engine.finish_decide`): only the round
trip differs, so an async view does not hold a thread while Redis answers.

asyncio connections belong to one event loop: each loop gets its own client
(an ASGI server runs one loop per process). A standalone Redis (``redis://``,
``rediss://``, ``unix://``) is asked from the loop; with Sentinel or Cluster
the engine's own client is used in a worker thread (asgiref's
``sync_to_async``), which is correct, only not thread-free.
"""

from __future__ import annotations

import asyncio
from typing import Any
from weakref import WeakKeyDictionary

import redis.asyncio
from asgiref.sync import sync_to_async
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from quotas.conf import quota_settings
from quotas.engine.core import Engine
from quotas.engine.decision import DecideCall, Decision
from quotas.engine.redis_connect import MAX_CONNECTIONS, STORE_ERRORS, parse_url
from quotas.engine.scripts import AsyncLuaScript

#: Per event loop: the engine the client was made for, the client, and decide.lua registered on it.
_clients: WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[Engine, Any, Any]] = WeakKeyDictionary()


async def decide(engine: Engine, call: DecideCall) -> Decision:
    """:meth:`Engine.decide_call` for a request's ``call``, awaiting Redis instead of blocking.

    A request's call: ``call.now`` and ``call.peek`` are for tests and
    operators, which decide synchronously. Raises
    :class:`~quotas.exceptions.StoreUnavailable` when Redis fails, as
    :meth:`Engine.decide` does (the circuit breaker and metrics are the engine's).
    """
    script = script_for(engine)
    if script is None:
        return await sync_to_async(engine.decide_call, thread_sensitive=False)(call)
    pending = engine.prepare_decide(call)
    if isinstance(pending, Decision):
        return pending  # answered from this process's memory of refused clients
    try:
        raw = await script(keys=pending.keys, args=pending.args)
    except STORE_ERRORS as exc:
        raise engine.decide_failed(call.tag, exc) from exc
    return engine.finish_decide(pending, raw)


async def close() -> None:
    """Close this event loop's client (before the loop ends, e.g. in tests or at ASGI shutdown)."""
    entry = _clients.pop(asyncio.get_running_loop(), None)
    if entry is not None:
        await entry[1].aclose()


def script_for(engine: Engine) -> Any:
    """The decide function on this loop's asyncio client for ``engine`` (made on first use), or None where the
    client is not standalone (Sentinel, Cluster: the engine's own client decides in a worker thread)."""
    loop = asyncio.get_running_loop()
    entry = _clients.get(loop)
    if entry is not None and entry[0] is engine:
        return entry[2]
    url = quota_settings.REDIS_URL
    if parse_url(url).topology != "standalone":
        return None
    timeout = float(quota_settings.SOCKET_TIMEOUT)
    client = redis.asyncio.Redis.from_url(
        url,
        socket_timeout=timeout,
        socket_connect_timeout=float(quota_settings.CONNECT_TIMEOUT),
        # As the engine's client (quotas/engine/redis_connect.py): a timeout is never retried, since the
        # script may have run; a refused connection is retried once, at once.
        retry=Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
        max_connections=MAX_CONNECTIONS,  # the sync clients' cap: one per in-flight decision at most
    )
    script = AsyncLuaScript(client, "decide")
    # An engine rebuilt after a settings change gets a new client; the old one's connections close
    # when it is collected.
    _clients[loop] = (engine, client, script)
    return script
