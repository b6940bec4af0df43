"""The usage API's query parameters (validated) and response bodies (documented in the schema)."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from django.core.validators import RegexValidator
from django.utils import timezone
from rest_framework import serializers

from plans.models import Plan
from quotas.internal_api import usage_date

from .reports import GROUPS, MAX_DAYS, UsageQuery

DEFAULT_DAYS = 30
#: Every group_by of the report, in each of its bodies' descriptions: one enum in the schema, not three
#: (drf-spectacular warns about, and renames, enums of one field name with different choices).
REPORT_GROUPS = ("day", "scope", "minute", "hour")
#: Days a report may name: usage is dated in days since 1970, and the last day
#: leaves room for the date arithmetic of a report (no OverflowError at date.max).
FIRST_DAY, LAST_DAY = date(1970, 1, 1), date(9999, 12, 1)
CLIENT_TAG = RegexValidator(r"^[A-Za-z0-9._~-]{1,100}$", "Not a client tag; tags look like s.12, u.5 or ip.10.0.0.7.")


class UsageQuerySerializer(serializers.Serializer):
    """``from``/``to`` (YYYY-MM-DD, at most 366 days), ``group_by``, and for staff ``client`` and ``plan``."""

    def get_fields(self) -> dict[str, serializers.Field]:
        # "from" is a Python keyword, so the fields are declared here rather than as attributes.
        return {
            "from": serializers.DateField(required=False, input_formats=["%Y-%m-%d"]),
            "to": serializers.DateField(required=False, input_formats=["%Y-%m-%d"]),
            "group_by": serializers.ChoiceField(choices=GROUPS, required=False, default="day"),
            "client": serializers.CharField(required=False, validators=[CLIENT_TAG]),
            "plan": serializers.SlugRelatedField(slug_field="slug", queryset=Plan.objects.all(), required=False),
        }

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        # Checked before any field reads the database: PostgreSQL refuses NUL in a query's text.
        # items(), not iteration: the stubs say iterating the fields gives Field objects, where it gives names.
        nul = {
            name: "Must not contain NUL characters."
            for name, _field in self.fields.items()
            if "\x00" in str(data.get(name, ""))
        }
        if nul:
            raise serializers.ValidationError(nul)
        if "client" in data:  # accept the tag as Redis writes it, braces included
            data = data.copy()
            data["client"] = data["client"].strip().strip("{}")
        return super().to_internal_value(data)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        for name in ("from", "to"):
            day = attrs.get(name)
            if day is not None and not FIRST_DAY <= day <= LAST_DAY:
                raise serializers.ValidationError({name: f"Give a day from {FIRST_DAY} to {LAST_DAY}, not {day}."})
        end = attrs.get("to") or usage_date(timezone.now())
        start = attrs.get("from") or max(FIRST_DAY, end - timedelta(days=DEFAULT_DAYS - 1))
        if start > end:
            raise serializers.ValidationError({"from": f"The first day ({start}) is after the last day ({end})."})
        if (end - start).days + 1 > MAX_DAYS:
            raise serializers.ValidationError({"to": f"A report covers at most {MAX_DAYS} days; ask for fewer."})
        attrs["from"], attrs["to"] = start, end
        return attrs

    def query(self, client: str | None) -> UsageQuery:
        """The validated query, for ``client`` (None: every client, or the ``client`` parameter)."""
        data = self.validated_data
        return UsageQuery(data["from"], data["to"], data["group_by"], client or data.get("client"), data.get("plan"))


# The response serializers document the bodies in the OpenAPI schema; the views build the bodies.


class DeniedBySerializer(serializers.Serializer):
    """Refusals by reason; null for a reason the mode does not count apart."""

    rate = serializers.IntegerField(allow_null=True, help_text="Refused by a rate limit.")
    budget = serializers.IntegerField(allow_null=True, help_text="Refused by a money budget.")
    acl = serializers.IntegerField(allow_null=True, help_text="Refused by an access rule.")
    capacity = serializers.IntegerField(allow_null=True, help_text="Refused while capacity was reduced under load.")
    banned = serializers.IntegerField(
        allow_null=True, help_text="Refused while the client was banned for repeated refusals."
    )
    local = serializers.IntegerField(
        allow_null=True,
        help_text="Refused from a process's memory of the client (minute and hour only; the daily usage counts "
        "these under their reason, so null there).",
    )


class UsageFiguresSerializer(serializers.Serializer):
    """The counters every usage row holds, in every mode (usage.rows)."""

    allowed = serializers.IntegerField(help_text="Admitted requests.")
    denied = serializers.IntegerField(help_text="Refused requests, for every reason.")
    denied_by = DeniedBySerializer(
        allow_null=True, help_text="The refusals by reason; null in a client's own history (totals only)."
    )
    shadow_would_deny = serializers.IntegerField(
        allow_null=True,
        help_text="Admitted, but a shadow limit would have refused (so not among denied); null where not kept.",
    )
    total = serializers.IntegerField(help_text="allowed + denied.")
    denial_rate = serializers.FloatField(help_text="denied / total, 0.0 when nothing was decided.")
    weight = serializers.IntegerField(
        allow_null=True, help_text="Units spent by admitted requests (group_by=day|scope; null in the history)."
    )
    cost = serializers.DecimalField(
        max_digits=24,
        decimal_places=6,
        allow_null=True,
        help_text="Cost of admitted requests, a decimal string (group_by=day|scope; null in the history).",
    )


class UsageRowSerializer(UsageFiguresSerializer):
    day = serializers.DateField(
        required=False, help_text="With group_by=day: the usage day (in QUOTAS['BUDGET_TIME_ZONE'])."
    )
    scope = serializers.CharField(
        required=False, allow_null=True, help_text="With group_by=scope: the view's quota_scope (null: none)."
    )


class HistoryRowSerializer(UsageFiguresSerializer):
    start = serializers.DateTimeField(help_text="The minute's or hour's start, UTC.")
    plan = serializers.CharField(allow_null=True, help_text="The plan's slug (null: no plan).")
    scope = serializers.CharField(allow_null=True, help_text="The view's quota_scope (null: none).")


class ClientHistoryRowSerializer(UsageFiguresSerializer):
    start = serializers.DateTimeField(help_text="The minute's or hour's start, UTC.")


class TopClientSerializer(serializers.Serializer):
    client = serializers.CharField()
    requests = serializers.IntegerField()


class TopClientsSerializer(serializers.Serializer):
    allowed = TopClientSerializer(many=True)
    denied = TopClientSerializer(many=True)


class HistoryReportSerializer(serializers.Serializer):
    """group_by=minute|hour, for viewers who see every client: per plan and scope, with the top clients."""

    group_by = serializers.ChoiceField(choices=REPORT_GROUPS)
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    plan = serializers.CharField(allow_null=True)
    rows = HistoryRowSerializer(many=True, help_text="One per minute or hour, plan and scope with any request.")
    top_clients = TopClientsSerializer()


class ClientHistoryReportSerializer(serializers.Serializer):
    """group_by=minute|hour for one subscription: its own requests (its key, or staff naming it)."""

    group_by = serializers.ChoiceField(choices=REPORT_GROUPS)
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    client = serializers.CharField()
    rows = ClientHistoryRowSerializer(many=True, help_text="One per minute or hour with any request.")


class UsageReportSerializer(serializers.Serializer):
    """group_by=day|scope: usage between two days, with today's not yet flushed counts."""

    def get_fields(self) -> dict[str, serializers.Field]:
        return {
            "from": serializers.DateField(),
            "to": serializers.DateField(),
            "group_by": serializers.ChoiceField(choices=REPORT_GROUPS),
            "client": serializers.CharField(allow_null=True, help_text="The client reported on; null: every client."),
            "plan": serializers.CharField(allow_null=True, help_text="The plan filter (slug), if any."),
            "rows": UsageRowSerializer(many=True, help_text="One per day or scope with any usage, in order."),
            "totals": UsageFiguresSerializer(),
            "live": serializers.BooleanField(help_text="Whether today's counts not yet flushed are included."),
        }


class LimitStandingSerializer(serializers.Serializer):
    name = serializers.CharField()
    scope = serializers.CharField(allow_null=True)
    algorithm = serializers.CharField()
    quota = serializers.IntegerField(help_text="The quota in force: plan_quota scaled by the adaptive multiplier.")
    plan_quota = serializers.IntegerField(help_text="The plan's quota.")
    multiplier = serializers.FloatField(help_text="The adaptive multiplier of the plan now (1.0: none).")
    window = serializers.IntegerField(help_text="Seconds.")
    period = serializers.CharField(allow_null=True)
    remaining = serializers.IntegerField()
    reset = serializers.IntegerField(help_text="Seconds until the full quota is back.")


class BudgetStandingSerializer(serializers.Serializer):
    name = serializers.CharField()
    period = serializers.CharField()
    currency = serializers.CharField()
    amount = serializers.DecimalField(max_digits=24, decimal_places=6)
    spent = serializers.DecimalField(max_digits=24, decimal_places=6)
    remaining = serializers.DecimalField(max_digits=24, decimal_places=6)
    resets_at = serializers.DateTimeField()


class PlanSummarySerializer(serializers.Serializer):
    slug = serializers.CharField()
    name = serializers.CharField()
    monthly_price = serializers.DecimalField(max_digits=14, decimal_places=6)  # money's one scale (api_amount)


class UpgradeSerializer(PlanSummarySerializer):
    because = serializers.CharField(help_text="The limit or budget that is nearly used up.")


class StandingSerializer(serializers.Serializer):
    """Documents ``GET /api/v1/usage/current`` (the body comes from ``quotas.standing``)."""

    client = serializers.CharField()
    plan = PlanSummarySerializer(allow_null=True)
    limits = LimitStandingSerializer(many=True)
    budgets = BudgetStandingSerializer(many=True)
    upgrade = UpgradeSerializer(allow_null=True, help_text="A bigger plan, offered from 80 % used.")


class RefusingWindowSerializer(serializers.Serializer):
    policy = serializers.CharField(help_text="The limit's policy name (as in RateLimit-Policy).")
    window = serializers.JSONField(help_text="Seconds, or a calendar period's name (day, month, ...).")
    limit = serializers.JSONField(help_text="The quota; for a budget, money as a decimal string of its currency.")
    remaining = serializers.JSONField(help_text="What was left; for a budget, a decimal string of its currency.")
    reset = serializers.FloatField(help_text="Seconds until the full quota was back.")
    retry_after = serializers.FloatField(allow_null=True, help_text="Seconds the client had to wait.")
    currency = serializers.CharField(required=False, help_text="Budgets only: the ISO 4217 currency.")


class RefusalSerializer(serializers.Serializer):
    at = serializers.FloatField(help_text="Epoch seconds.")
    time = serializers.DateTimeField(help_text="at, in ISO 8601 (UTC).")
    reason = serializers.CharField(help_text="rate, budget, acl, capacity, banned or local.")
    plan = serializers.CharField(allow_null=True)
    scope = serializers.CharField(allow_blank=True)
    retry_after = serializers.IntegerField(required=False, allow_null=True)
    windows = RefusingWindowSerializer(many=True, required=False, help_text="The windows that refused.")
    local = serializers.BooleanField(required=False, help_text="Answered from a process's memory, not Redis.")
    ban_until = serializers.FloatField(required=False, help_text="A ban's end, epoch seconds.")
    acl_entry = serializers.IntegerField(required=False, help_text="The access-list entry that refused.")


class RefusalsSerializer(serializers.Serializer):
    """Documents ``GET /api/v1/usage/refusals``."""

    client = serializers.CharField()
    refusals = RefusalSerializer(many=True, help_text="Newest first.")
