"""The webhook signature: ``Quota-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>``.

The timestamp is signed with the body, so a receiver that refuses old timestamps (:data:`TOLERANCE`) cannot be
replayed a captured request later. While an endpoint's rolled secret overlaps its new one, the header carries
one ``v1=`` per secret, the new one first (``t=<t>,v1=<new>,v1=<old>``, as Stripe does), and a receiver accepts
the request when any of them matches its secret. docs/notifications.md shows the check a receiver writes;
tests/notifications runs that snippet against real deliveries.
"""

from __future__ import annotations

import hashlib
import hmac

HEADER = "Quota-Signature"
#: Seconds a receiver should accept a timestamp away from its clock.
TOLERANCE = 300


def signature(secret: str, timestamp: int, body: str, *older: str) -> str:
    """The header's value for ``body`` sent at ``timestamp``, signed with ``secret`` and then with each of the
    ``older`` secrets still accepted."""
    macs = ",".join(f"v1={_mac(s, timestamp, body)}" for s in (secret, *older))
    return f"t={timestamp},{macs}"


def _mac(secret: str, timestamp: int, body: str) -> str:
    return hmac.new(secret.encode(), f"{timestamp}.{body}".encode(), hashlib.sha256).hexdigest()
