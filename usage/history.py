"""The usage API's recent history: ``group_by=minute`` or ``hour``.

Operators (callers who may see every client's usage) get the engine's history
(:mod:`quotas.observability.history`): requests allowed and refused by reason,
per plan and scope, for the last 2 hours per minute or the last 7 days per
hour, plus the top clients of each hour.

A client (its API key, or a signed-in user with a subscription) gets its own
per-subscriber history instead: requests admitted and refused per minute or
hour, from the same module's per-client hashes. Those keep every minute for
``CLIENT_KEEP`` (25 hours) after its hour ends, so both resolutions reach back
24 hours (the usage page's longest recent chart), with the last hour as slack.
Only subscriptions have such a history; a signed-in user without one gets a 400
(its own usage is in the daily report).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.utils import timezone
from rest_framework import serializers

from quotas.internal_api import back_office
from quotas.observability.history import (
    CLIENT_KEEP,
    CLIENT_KINDS,
    MINUTE_KEEP,
    TOP_KEEP,
    TOP_SIDES,
    ClientPoint,
    HistoryBucket,
)

from .rows import DENIED_BY, counters
from .serializers import CLIENT_TAG

#: The history's resolutions, as ``group_by`` names them, and how far back each reaches.
HISTORY_GROUPS = ("minute", "hour")
KEPT = {"minute": timedelta(hours=2), "hour": timedelta(days=7)}
#: Slack for the "how far back" check: a start a little before the limit is still served (its
#: hash outlives the limit by the keys' margin), so a client's clock a little fast is no error.
_SLACK = timedelta(seconds=MINUTE_KEEP - 2 * 3600)
DEFAULT_TOP = 10
#: How far back a client's own history reaches at each resolution: every minute is kept CLIENT_KEEP after
#: its hour ends, so 24 hours of minutes (and of hours) are always there, and the rest is slack as above.
CLIENT_KEPT = {"minute": timedelta(hours=24), "hour": timedelta(hours=24)}
_CLIENT_SLACK = timedelta(seconds=CLIENT_KEEP) - timedelta(hours=24)
#: The operators' parameters a client's own history refuses (ignoring a filter would answer another question).
OPERATORS_ONLY = {
    "plan": "Your own history is not kept per plan; plan filters the operators' history.",
    "top": "Your own history has no top clients; top is for operators.",
}
NOT_FOR_CLIENTS = (
    "Per-minute and per-hour history is kept per subscription (call with your API key) and, for operators, "
    "per plan and scope; use group_by=day or scope for your own usage."
)


class HistoryQuerySerializer(serializers.Serializer):
    """``group_by`` (minute or hour), ``start`` and ``end`` (ISO 8601), ``plan`` (slug) and ``top``: every
    client's history per plan and scope (with ``client``, the view serves that client's own instead)."""

    group_by = serializers.ChoiceField(choices=HISTORY_GROUPS)
    start = serializers.DateTimeField(required=False, help_text="Default: as far back as the resolution is kept.")
    end = serializers.DateTimeField(required=False, help_text="Default: now.")
    plan = serializers.SlugField(required=False, max_length=100)
    top = serializers.IntegerField(required=False, min_value=0, max_value=TOP_KEEP, default=DEFAULT_TOP)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        now = timezone.now()
        kept = KEPT[attrs["group_by"]]
        end = min(attrs.get("end") or now, now)  # nothing is counted in the future yet
        start = attrs.get("start") or now - kept
        if start < now - kept - _SLACK:
            kept_for = f"group_by={attrs['group_by']} is kept for {_span(kept)}"
            raise serializers.ValidationError({"start": f"{kept_for}: give a start after {_iso(now - kept)}."})
        if start > end:
            raise serializers.ValidationError({"start": f"The start ({_iso(start)}) is after the end ({_iso(end)})."})
        attrs["start"], attrs["end"] = start, end
        return attrs


def build_history(params: dict[str, Any]) -> dict[str, Any]:
    """The response body for validated ``params``: buckets in order, and the top clients of the hours
    the range touches (whole hours, every plan), from the engine's history.

    Raises ``STORE_ERRORS`` when Redis fails.
    """
    start, end, plan = params["start"], params["end"], params.get("plan")
    reads = back_office()
    buckets = reads.history(params["group_by"], start, end)
    top = {}
    for by in TOP_SIDES:
        clients = reads.top_clients(start, end, by=by, limit=params["top"])
        top[by] = [{"client": client, "requests": n} for client, n in clients]
    return {
        "group_by": params["group_by"],
        "start": _iso(start),
        "end": _iso(end),
        "plan": plan,
        "rows": [_row(b) for b in buckets if plan is None or b.plan == plan],
        "top_clients": top,
    }


class ClientHistoryQuerySerializer(serializers.Serializer):
    """A client's own history: ``group_by`` (minute or hour), ``start`` and ``end`` (ISO 8601), and ``client``
    (optional: its own tag, which the view checks); ``plan`` and ``top`` are for operators."""

    group_by = serializers.ChoiceField(choices=HISTORY_GROUPS)
    start = serializers.DateTimeField(required=False, help_text="Default: 24 hours ago.")
    end = serializers.DateTimeField(required=False, help_text="Default: now.")
    client = serializers.CharField(required=False, validators=[CLIENT_TAG])

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if "client" in data:  # accept the tag as Redis writes it, braces included (as the daily report does)
            data = data.copy()
            data["client"] = data["client"].strip().strip("{}")
        return super().to_internal_value(data)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        for name, why in OPERATORS_ONLY.items():
            if name in self.initial_data:
                raise serializers.ValidationError({name: why})
        now = timezone.now()
        kept = CLIENT_KEPT[attrs["group_by"]]
        earliest = now - kept
        kept_for = f"Your own group_by={attrs['group_by']} history is kept for {_span(kept)}"
        end = min(attrs.get("end") or now, now)  # nothing is counted in the future yet
        start = attrs.get("start") or min(earliest, end)
        # The end first: with no start given, an end too early is what makes the start too early too.
        for name, moment in (("end", end), ("start", start)):
            if moment < earliest - _CLIENT_SLACK:
                raise serializers.ValidationError({name: f"{kept_for}: give a {name} after {_iso(earliest)}."})
        if start > end:
            raise serializers.ValidationError({"start": f"The start ({_iso(start)}) is after the end ({_iso(end)})."})
        attrs["start"], attrs["end"] = start, end
        return attrs


def has_client_history(tag: str) -> bool:
    """Whether the client ``tag`` (with or without braces) has a history of its own: subscriptions only."""
    return tag.strip("{}").startswith(CLIENT_KINDS)


def build_client_history(params: dict[str, Any], tag: str) -> dict[str, Any]:
    """The response body for a client's validated ``params``: its own minutes or hours with any request, in
    order, from its history. ``tag`` is its client tag (with or without braces).

    Raises ``STORE_ERRORS`` when Redis fails.
    """
    start, end = params["start"], params["end"]
    points = back_office().client_history(tag, params["group_by"], start=start, end=end)
    return {
        "group_by": params["group_by"],
        "start": _iso(start),
        "end": _iso(end),
        "client": tag.strip("{}"),
        "rows": [_client_row(p) for p in points if p.allowed or p.denied],
    }


def _client_row(point: ClientPoint) -> dict[str, Any]:
    return {"start": _iso(point.start), **counters(point.allowed, None, denied=point.denied)}


def _row(bucket: HistoryBucket) -> dict[str, Any]:
    c = bucket.counters
    denied_by = {reason: c[f"denied_{reason}"] for reason in DENIED_BY}
    return {
        "start": _iso(bucket.start),
        "plan": bucket.plan,
        "scope": bucket.scope,
        **counters(c["allowed"], denied_by, denied=bucket.denied, shadow_would_deny=c["shadow_would_deny"]),
    }


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _span(kept: timedelta) -> str:
    # "7 days", "2 hours"; a single day reads better as "24 hours".
    if kept.days > 1 and not kept.seconds:
        return f"{kept.days} days"
    return f"{int(kept.total_seconds()) // 3600} hours"
