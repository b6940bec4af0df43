"""The event types, and the body every webhook carries (one owner of the format, see docs/notifications.md).

A body is JSON: ``{"id": "<uuid>", "type": "<type>", "created": "<ISO 8601, UTC>", "data": {...}}``; ``id`` is
the same on every attempt and every endpoint, so a receiver drops repeats by it.
"""

from __future__ import annotations

import json
from typing import Any

from quotas.formats.money import format_money

BUDGET_THRESHOLD = "budget.threshold_crossed"
CLIENT_BANNED = "client.banned"
BAN_ENDED = "client.ban_ended"
KEY_EXPIRING = "api_key.expiring"
REFUSALS_SUSTAINED = "refusals.sustained"
ENDPOINT_DISABLED = "endpoint.disabled"
#: One of a subscription's own alert thresholds reached (notifications.thresholds).
SPEND_THRESHOLD = "spend.threshold_reached"
#: The threshold of a budget used up (the other is 80).
EXHAUSTED = 100
#: Every event type a subscription can ask for.
EVENT_TYPES = (
    BUDGET_THRESHOLD, SPEND_THRESHOLD, CLIENT_BANNED, BAN_ENDED, KEY_EXPIRING, REFUSALS_SUSTAINED, ENDPOINT_DISABLED,
)  # fmt: skip
#: The event types as form choices (the admin's and the console page's checkboxes).
EVENT_CHOICES = [(event_type, event_type) for event_type in EVENT_TYPES]
#: Where the event types and their bodies are described, in the published documentation (a repository path
#: means nothing to a project that installed the package).
EVENTS_DOCS_URL = "https://django-quota-platform.readthedocs.io/notifications/"
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
        text = f"{_spend_text(data)}. " + (
            "Requests that cost money are refused until the period ends." if over else ""
        )
        return subject, text.strip()
    if event_type == SPEND_THRESHOLD:
        subject = f"{data['threshold']} % of {data['budget']} spent"
        return subject, f"{_spend_text(data)}: it reached the {data['threshold']} % alert its owners set."
    texts = _OTHER_TEXTS.get(event_type)
    if texts is None:
        raise ValueError(f"no e-mail for event type {event_type!r}")
    return texts(data["subscription"]["name"] if "subscription" in data else "", data)


def _spend_text(data: dict[str, Any]) -> str:
    if "unit" in data:  # a period quota, counted in requests or units
        return (
            f"{data['subscription']['name']} has used {data['used']} of its {data['limit']} {data['unit']} "
            f"{data['budget']} (period from {data['period_start']})"
        )
    return (
        f"{data['subscription']['name']} has spent {format_money(data['spent'], data['currency'])} of its "
        f"{format_money(data['amount'], data['currency'])} {data['budget']} (period from {data['period_start']})"
    )


#: The e-mails of the events that are not about money: (subscription's name, data) -> (subject, text).
_OTHER_TEXTS = {
    CLIENT_BANNED: lambda name, data: ("API access suspended", (
        f"{name} was refused too often and is banned until {data['until']}: every request is refused until then."
    )),
    BAN_ENDED: lambda name, data: (
        "API access restored", f"The ban of {name} ended ({data['how']}) at {data['ended']}."
    ),
    KEY_EXPIRING: lambda name, data: (f"API key {data['key']['prefix']}... expires soon", (
        f"The API key {data['key']['name'] or data['key']['prefix'] + '...'} of {name} stops working at "
        f"{data['expires_at']}. Issue a new key before then."
    )),
    REFUSALS_SUSTAINED: lambda name, data: ("Many requests refused", (
        f"{data['refused']} requests of {name} were refused in the {data['window_seconds'] // 60} minutes "
        f"to {data['at']}: it is over its limits; a bigger plan or fewer requests would help."
    )),
    ENDPOINT_DISABLED: lambda name, data: ("Webhook endpoint disabled", (
        f"The webhook endpoint {data['url']} failed {data['failures']} times in a row and was disabled; "
        "nothing is sent there until it is enabled again."
    )),
}  # fmt: skip
