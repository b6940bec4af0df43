"""The benchmark's private redis-server."""

from __future__ import annotations

from dataclasses import dataclass

from config.embedded_redis import RedisServer


@dataclass
class BenchRedisServer(RedisServer):
    """The project's embedded redis-server, with DEBUG allowed from loopback.

    The memory section pauses active expiry (``DEBUG SET-ACTIVE-EXPIRE 0``):
    a token bucket's key lives only until the bucket is full again (0.6 s
    after one request at 100/min), so without the pause part of what it
    measures would already be gone.
    """

    def command(self) -> list[str]:
        return [*super().command(), "--enable-debug-command", "local"]
