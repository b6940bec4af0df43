"""The event types, and the body every webhook carries (one owner of the format, see docs/notifications.md).

A body is JSON: ``{"id": "<uuid>", "type": "<type>", "created": "<ISO 8601, UTC>", "data": {...}}``; ``id`` is
the same on every attempt and every endpoint, so a receiver drops repeats by it.
"""

from __future__ import annotations

import json
from typing import Any

BUDGET_THRESHOLD = "budget.threshold_crossed"
CLIENT_BANNED = "client.banned"
BAN_ENDED = "client.ban_ended"
KEY_EXPIRING = "api_key.expiring"
REFUSALS_SUSTAINED = "refusals.sustained"
ENDPOINT_DISABLED = "endpoint.disabled"
#: The threshold of a budget used up (the other is 80).
EXHAUSTED = 100
#: Every event type a subscription can ask for.
EVENT_TYPES = (BUDGET_THRESHOLD, CLIENT_BANNED, BAN_ENDED, KEY_EXPIRING, REFUSALS_SUSTAINED, ENDPOINT_DISABLED)
#: Sent to one endpoint when its owner asks (notifications.manage.send_test), whatever types it wants; never
#: asked for, so not one of EVENT_TYPES.
WEBHOOK_TEST = "webhook.test"


def body(event_id: str, event_type: str, created: str, data: dict[str, Any]) -> str:
    """The JSON body of an event, as sent (and signed) byte for byte."""
    return json.dumps({"id": event_id, "type": event_type, "created": created, "data": data}, separators=(",", ":"))


def email_text(event_type: str, data: dict[str, Any]) -> tuple[str, str]:
    """The subject and text of an event's e-mail."""
    if event_type == BUDGET_THRESHOLD:
        over = data["threshold"] >= EXHAUSTED
        subject = f"Budget {data['budget']} {'used up' if over else 'at ' + str(data['threshold']) + ' %'}"
        text = (
            f"{data['subscription']['name']} has spent {data['spent']} {data['currency']} of its "
            f"{data['amount']} {data['currency']} {data['budget']} (period from {data['period_start']}). "
            + ("Requests that cost money are refused until the period ends." if over else "")
        )
        return subject, text.strip()
    name = data["subscription"]["name"] if "subscription" in data else ""
    if event_type == CLIENT_BANNED:
        return "API access suspended", (
            f"{name} was refused too often and is banned until {data['until']}: every request is refused until then."
        )
    if event_type == BAN_ENDED:
        return "API access restored", f"The ban of {name} ended ({data['how']}) at {data['ended']}."
    if event_type == KEY_EXPIRING:
        key = data["key"]
        return f"API key {key['prefix']}... expires soon", (
            f"The API key {key['name'] or key['prefix'] + '...'} of {name} stops working at {data['expires_at']}. "
            "Issue a new key before then."
        )
    if event_type == REFUSALS_SUSTAINED:
        return "Many requests refused", (
            f"{data['refused']} requests of {name} were refused in the {data['window_seconds'] // 60} minutes "
            f"to {data['at']}: it is over its limits; a bigger plan or fewer requests would help."
        )
    if event_type == ENDPOINT_DISABLED:
        subject = "Webhook endpoint disabled"
        text = (
            f"The webhook endpoint {data['url']} failed {data['failures']} times in a row and was disabled; "
            "nothing is sent there until it is enabled again."
        )
        return subject, text
    raise ValueError(f"no e-mail for event type {event_type!r}")
