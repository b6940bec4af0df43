"""When each API key was last used, recorded off the request path.

A request with a key notes the time in this process (a dict assignment).
The poller thread writes the notes to one Redis sorted set
(:class:`~quotas.store.key_use_set.KeyUseSet`: an older note never replaces a
newer one), about once a second; the usage flush copies it to ``APIKey.last_used_at`` and then drops
the notes older than a day (``KEEP_SECONDS``), so the set holds the keys used
lately, not every key ever used. So the date is as precise as the flush
interval, and a request never waits for it.
"""

from __future__ import annotations

import time

from quotas.store.key_use_set import KeyUseSet

#: Notes older than this are dropped by the flush once it has copied them. A note that reaches Redis
#: later than this after its request (the poller kept it through a day-long outage) may be lost; the
#: key's next use records it again.
KEEP_SECONDS = 86_400


class KeyUse:
    """The keys this process saw used since its last write, with when."""

    def __init__(self) -> None:
        self._seen: dict[int, float] = {}

    def touch(self, key_id: int | None) -> None:
        """Note that key ``key_id`` was used now (a dict store: thread-safe under the GIL)."""
        if key_id is not None:
            self._seen[key_id] = time.time()

    def write(self, store: KeyUseSet) -> None:
        """Add the notes to the store's set; kept for the next try if Redis fails (which raises
        :class:`~quotas.exceptions.StoreUnavailable`)."""
        seen, self._seen = self._seen, {}
        if not seen:
            return
        try:
            store.write(seen)
        except Exception:
            for key_id, at in seen.items():  # the newer of the two, should the key be used meanwhile
                self._seen[key_id] = max(at, self._seen.get(key_id, 0.0))
            raise
