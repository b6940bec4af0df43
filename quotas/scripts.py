"""The Lua scripts, assembled from the files in ``quotas/lua`` and called by SHA.

``decide.lua`` is the only script on the request path. It is assembled once
per process from the shared helpers and one small file per algorithm, and
called by :class:`LuaScript`, which sends EVALSHA and loads the source only
when the server answers NOSCRIPT (after a restart or a SCRIPT FLUSH).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from functools import cache
from importlib import resources
from typing import Any

import redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError
from redis.exceptions import TimeoutError as RedisTimeoutError

#: Wire codes of the algorithms, shared with the Lua files.
ALGORITHM_CODES: dict[str, int] = {
    "fixed_window": 1,
    "sliding_window_log": 2,
    "sliding_window_counter": 3,
    "token_bucket": 4,
    "leaky_bucket": 5,
    "period_quota": 6,
    "budget": 7,
    "period_requests": 8,
    "concurrency": 9,
}

_PARTS = {
    "decide": (
        "common.lua",
        "fixed_window.lua",
        "sliding_window_counter.lua",
        "gcra.lua",
        "period.lua",
        "sliding_window_log.lua",
        "concurrency.lua",
        "ban.lua",
        "usage.lua",
        "bucket.lua",
        "decide.lua",
    ),
    "release": ("release.lua",),
    "refund": ("common.lua", "period.lua", "refund.lua"),
    "adjust": ("common.lua", "period.lua", "usage.lua", "adjust.lua"),
}


@cache
def script_source(name: str) -> str:
    """The assembled source of script ``name`` ("decide" or "refund")."""
    folder = resources.files("quotas") / "lua"
    return "\n".join(folder.joinpath(part).read_text(encoding="utf-8") for part in _PARTS[name])


class LuaScript:
    """A Lua script called by SHA; loaded into Redis only when it answers NOSCRIPT.

    With a plain :class:`redis.Redis` client the call goes straight through a
    pooled connection (send EVALSHA, read the reply): redis-py's generic
    command path (retries, callbacks, argument filtering) costs about a
    quarter of a decision, and the engine handles failures itself. Other
    clients (cluster) use redis-py's own :class:`~redis.commands.core.Script`.
    """

    def __init__(self, client: Any, source: str) -> None:
        self.client = client
        self.source = source
        self.sha = hashlib.sha1(source.encode("utf-8")).hexdigest()
        self._direct = type(client) is redis.Redis
        self._script = client.register_script(source)

    def __call__(self, keys: Sequence[str], args: Sequence[object]) -> Any:
        """Run the script; redis-py errors propagate (the caller maps them)."""
        if not self._direct:
            return self._script(keys=keys, args=args)
        pool = self.client.connection_pool
        conn = pool.get_connection()
        try:
            conn.send_command("EVALSHA", self.sha, len(keys), *keys, *args)
            try:
                return conn.read_response()
            except NoScriptError:
                conn.send_command("SCRIPT", "LOAD", self.source)
                conn.read_response()
                conn.send_command("EVALSHA", self.sha, len(keys), *keys, *args)
                return conn.read_response()
        except (RedisConnectionError, RedisTimeoutError, OSError):
            # A half-read reply must never be read by the next user of this connection.
            conn.disconnect()
            raise
        finally:
            pool.release(conn)
