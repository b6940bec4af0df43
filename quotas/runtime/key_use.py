"""When each API key was last used, and from which address, recorded off the request path.

A request with a key notes the time and the request in this process (a dict assignment: the address is not
worked out on the request path, where it would cost more than the note itself). The poller thread names each
note's address and writes the notes to Redis (:class:`~quotas.store.key_use_set.KeyUseSet`: an older note
never replaces a newer one), about once a second; the usage flush copies them to ``APIKey.last_used_at`` and
``APIKey.last_used_from`` and then drops the notes older than a day (``KEEP_SECONDS``), so Redis holds the keys
used lately, not every key ever used. So the date is as precise as the flush interval, and a request never
waits for it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from quotas.clock import SYSTEM_CLOCK, Clock
from quotas.store.key_use_set import KeyUseSet

logger = logging.getLogger(__name__)

#: Notes older than this are dropped by the flush once it has copied them. A note that reaches Redis
#: later than this after its request (the poller kept it through a day-long outage) may be lost; the
#: key's next use records it again.
KEEP_SECONDS = 86_400

#: What names a request's client address (the identity layer's ``client_ip``), given by whoever notes a use:
#: this layer sits below identity and cannot import it.
AddressOf = Callable[[Any], object]


class KeyUse:
    """The keys this process saw used since its last write: when, and the request (or, once named, the address)
    of the last use."""

    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self._now = clock.now  # the runtime's clock, bound once
        # key id -> (epoch seconds, the request and what names its address, or the address once named).
        self._seen: dict[int, tuple[float, Any, AddressOf | None]] = {}

    def touch(self, key_id: int | None, request: Any = None, address_of: AddressOf | None = None) -> None:
        """Note that key ``key_id`` was used now, by ``request``, whose address ``address_of(request)`` names
        when the notes are written (a dict store: thread-safe under the GIL).

        The request is kept until the next write (a second) rather than its address worked out here: naming it
        (``client_ip``) costs far more than noting the request and its namer.
        """
        if key_id is not None:
            self._seen[key_id] = (self._now(), request, address_of)

    def write(self, store: KeyUseSet) -> None:
        """Add the notes to the store; kept (their addresses named) for the next try if Redis fails (which
        raises :class:`~quotas.exceptions.StoreUnavailable`)."""
        seen, self._seen = self._seen, {}
        if not seen:
            return
        notes = {key_id: (at, _address(request, address_of)) for key_id, (at, request, address_of) in seen.items()}
        try:
            store.write(notes)
        except Exception:
            for key_id, (at, address) in notes.items():  # the newer of the two, should the key be used meanwhile
                newer = self._seen.get(key_id)
                if newer is None or newer[0] < at:
                    self._seen[key_id] = (at, address, None)
            raise


def _address(request: Any, address_of: AddressOf | None) -> str | None:
    """The address of a note: named by ``address_of``, or the text kept from an earlier try (None: unknown)."""
    if address_of is None:
        return request if isinstance(request, str) else None
    try:
        return str(address_of(request))
    except Exception:  # a project's QUOTAS['CLIENT_IP'] hook failing must not lose the note's time
        logger.exception("quotas: could not name the client address of an API key's use")
        return None
