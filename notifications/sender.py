"""POSTing a webhook: only to public addresses (SSRF), within a timeout, reading a bounded answer.

The guard is :mod:`quotas.outbound`'s, shared with the allow and deny list feeds: the URL's host is resolved
once, every address it resolves to must be public unless ``QUOTAS['NOTIFICATIONS']['ALLOW_PRIVATE_ADDRESSES']``,
and the connection goes to the address checked. Redirects are not followed: a 3xx is a failure.
"""

from __future__ import annotations

from dataclasses import dataclass

from quotas.outbound import Policy, Refused, Target, request
from quotas.outbound import check_url as check_outbound_url

from .conf import notification_settings

__all__ = ["USER_AGENT", "Answer", "Refused", "check_url", "post"]

USER_AGENT = "quota-platform-webhooks/1"


@dataclass(frozen=True, slots=True)
class Answer:
    """What a receiver answered."""

    status: int
    body: str


def check_url(url: str) -> Target:
    """Where ``url`` leads once its scheme and every address it resolves to are allowed by the notifications'
    settings; raises :class:`Refused` naming why not, and ``TimeoutError`` when its host does not resolve within
    ``TIMEOUT`` seconds (a send would not wait longer)."""
    return check_outbound_url(
        url,
        allow_http=bool(notification_settings.ALLOW_HTTP),
        allow_private=bool(notification_settings.ALLOW_PRIVATE_ADDRESSES),
        timeout=float(notification_settings.TIMEOUT),
    )


def post(url: str, body: str, headers: dict[str, str]) -> Answer:
    """POST ``body`` (JSON) to ``url``; the receiver's answer. Raises :class:`Refused` for a URL not allowed and
    ``OSError`` (timeouts included) or ``http.client.HTTPException`` when the exchange fails."""
    policy = Policy(
        allow_http=bool(notification_settings.ALLOW_HTTP),
        allow_private=bool(notification_settings.ALLOW_PRIVATE_ADDRESSES),
        timeout=float(notification_settings.TIMEOUT),
        limit=int(notification_settings.MAX_RESPONSE_BYTES),
    )
    answer = request(
        "POST",
        url,
        policy,
        body=body.encode(),
        headers={"Content-Type": "application/json", "User-Agent": USER_AGENT, **headers},
    )
    return Answer(answer.status, answer.body.decode("utf-8", "replace")[:1000])
