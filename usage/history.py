"""The usage API's recent history for operators: ``group_by=minute`` (last 2 hours) or ``hour`` (last 7 days).

The figures are the engine's history (:mod:`quotas.observability.history`):
requests allowed and refused by reason, per plan and scope, plus the top
clients of each hour. They are kept per plan and scope, not per client, so only
callers who may see every client's usage get them; a client calling with its
API key gets a 400 (its own usage is in the daily report, and a per-client
history exists only for the busiest clients, which would say nothing to the
others).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.utils import timezone
from rest_framework import serializers

from quotas.observability.history import (
    MINUTE_KEEP,
    TOP_KEEP,
    TOP_SIDES,
    HistoryBucket,
    read_history,
    read_top_clients,
)

#: The history's resolutions, as ``group_by`` names them, and how far back each reaches.
HISTORY_GROUPS = ("minute", "hour")
KEPT = {"minute": timedelta(hours=2), "hour": timedelta(days=7)}
#: Slack for the "how far back" check: a start a little before the limit is still served (its
#: hash outlives the limit by the keys' margin), so a client's clock a little fast is no error.
_SLACK = timedelta(seconds=MINUTE_KEEP - 2 * 3600)
DEFAULT_TOP = 10
NOT_FOR_CLIENTS = (
    "Per-minute and per-hour history is kept per plan and scope for operators (per client only for the "
    "busiest clients); use group_by=day or scope for your own usage."
)


class HistoryQuerySerializer(serializers.Serializer):
    """``group_by`` (minute or hour), ``start`` and ``end`` (ISO 8601), ``plan`` (slug) and ``top``."""

    group_by = serializers.ChoiceField(choices=HISTORY_GROUPS)
    start = serializers.DateTimeField(required=False, help_text="Default: as far back as the resolution is kept.")
    end = serializers.DateTimeField(required=False, help_text="Default: now.")
    plan = serializers.SlugField(required=False, max_length=100)
    top = serializers.IntegerField(required=False, min_value=0, max_value=TOP_KEEP, default=DEFAULT_TOP)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "client" in self.initial_data:
            raise serializers.ValidationError({"client": "History is per plan and scope; see top_clients instead."})
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


def build_history(params: dict[str, Any], redis_client: Any, prefix: str) -> dict[str, Any]:
    """The response body for validated ``params``: buckets in order, and the top clients of the hours
    the range touches (whole hours, every plan), from the history under ``prefix``.

    Raises what the Redis client raises.
    """
    start, end, plan = params["start"], params["end"], params.get("plan")
    buckets = read_history(redis_client, prefix, params["group_by"], start, end)
    top = {}
    for by in TOP_SIDES:
        clients = read_top_clients(redis_client, prefix, start, end, by=by, limit=params["top"])
        top[by] = [{"client": client, "requests": n} for client, n in clients]
    return {
        "group_by": params["group_by"],
        "start": _iso(start),
        "end": _iso(end),
        "plan": plan,
        "rows": [_row(b) for b in buckets if plan is None or b.plan == plan],
        "top_clients": top,
    }


def _row(bucket: HistoryBucket) -> dict[str, Any]:
    return {
        "start": _iso(bucket.start),
        "plan": bucket.plan,
        "scope": bucket.scope,
        **bucket.counters,
        "denied": bucket.denied,
        "total": bucket.total,
        "denial_rate": round(bucket.denial_rate, 6),
    }


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _span(kept: timedelta) -> str:
    return f"{kept.days} days" if kept.days else f"{kept.seconds // 3600} hours"
