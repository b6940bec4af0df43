"""Each client's last refusals in Redis: one list per client, ``<prefix>:why:{<client>}``, newest first.

:class:`~quotas.observability.refusals.RefusalLog` notes the records (small JSON objects) and owns their
format; this module only pushes and reads them. Every call raises
:class:`~quotas.exceptions.StoreUnavailable` when Redis fails.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from quotas.contract.keys import refusals_key
from quotas.store.failures import unavailable


class RefusalLists:
    """The last refusals under ``prefix`` in the Redis ``client`` holds."""

    def __init__(self, client: Any, prefix: str) -> None:
        self._client = client
        self.prefix = prefix

    def write(self, by_client: Mapping[str, Sequence[str]], keep: int, ttl: int) -> None:
        """Push each client's records (oldest first, so the newest ends at the head) in one pipeline, keep the
        last ``keep`` of each list, and let each list go ``ttl`` seconds after this write."""
        with unavailable("writing the last refusals"):
            pipe = self._client.pipeline(transaction=False)
            for tag, records in by_client.items():
                key = refusals_key(self.prefix, tag)
                pipe.lpush(key, *records[-keep:])
                pipe.ltrim(key, 0, keep - 1)
                pipe.expire(key, ttl)
            pipe.execute()

    def read(self, tag: str, count: int) -> list[bytes]:
        """The newest ``count`` records of client ``tag`` (``s.12`` or ``{s.12}``), newest first."""
        with unavailable(f"reading the last refusals of {tag}"):
            return list(self._client.lrange(refusals_key(self.prefix, tag), 0, count - 1))
