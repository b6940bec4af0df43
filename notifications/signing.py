"""The webhook signature: ``Quota-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>``.

The timestamp is signed with the body, so a receiver that refuses old timestamps (:data:`TOLERANCE`) cannot be
replayed a captured request later. docs/notifications.md shows the check a receiver writes;
tests/notifications runs that snippet against real deliveries.
"""

from __future__ import annotations

import hashlib
import hmac

HEADER = "Quota-Signature"
#: Seconds a receiver should accept a timestamp away from its clock.
TOLERANCE = 300


def signature(secret: str, timestamp: int, body: str) -> str:
    """The header's value for ``body`` sent at ``timestamp`` and signed with ``secret``."""
    mac = hmac.new(secret.encode(), f"{timestamp}.{body}".encode(), hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"
