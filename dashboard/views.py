"""The staff dashboard: an overview page, its JSON feed (polled), and a page per client.

Every view requires a staff session; anyone else is sent to the admin login.
"""

from __future__ import annotations

import logging
import re
from datetime import timedelta
from typing import Any

from django.contrib.admin.views.decorators import staff_member_required
from django.contrib.auth.decorators import permission_required
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone

from plans.models import ACLEntry, ClientBan, Plan, Subscription
from plans.rules import subscriber_of
from quotas import api
from quotas.api import Client
from quotas.exceptions import StoreUnavailable
from quotas.internal_api import MAX_TEXT, STORE_ERRORS, is_client_tag, rules_snapshot, usage_date
from usage.models import UsageRecord
from usage.reports import UsageQuery, build_report
from usage.views import VIEW_ALL_USAGE

from .budgets import budget_panel
from .history import RANGES, alert_from, charts, range_from
from .queries import (
    Filters,
    UsageSlice,
    adaptive_panel,
    decorate_standing,
    refusal_rows,
    subscription_id,
    upgrade_candidates,
)

logger = logging.getLogger(__name__)

POLL_SECONDS = 5
_DIGITS = re.compile(r"[0-9]{1,9}")  # ASCII only: str.isdigit() also accepts "²", which int() refuses
RECENT_DAYS = 14


def filters_from(request: HttpRequest) -> Filters:
    """The plan, scope, day range, chart range and alert threshold asked for in the query string (bad values
    are ignored)."""
    plan = request.GET.get("plan", "")
    scope = request.GET.get("scope")
    days = request.GET.get("days", "30")
    if scope is not None and (scope == "*" or len(scope) > MAX_TEXT or "\x00" in scope):
        scope = None  # no such scope can exist (and PostgreSQL refuses NUL in a query)
    return Filters(
        days=min(max(int(days), 1), 366) if _DIGITS.fullmatch(days) else 30,
        plan_id=int(plan) if _DIGITS.fullmatch(plan) else None,
        scope=scope,
        range=range_from(request.GET.get("range")),
        alert=alert_from(request.GET.get("alert")),
    )


def payload(filters: Filters) -> dict[str, Any]:
    """Everything the overview shows, as JSON-ready data."""
    usage = UsageSlice(filters)
    top_clients = usage.top_clients()
    for row in top_clients:  # straight to why they were refused
        row["url"] = reverse("dashboard:client", args=[row["client"]]) + "#refusals"
    rules = rules_snapshot()
    upgrades = upgrade_candidates(rules, filters.today)
    for row in upgrades:
        row["url"] = reverse("dashboard:client", args=[row["client"]])
    return {
        "generated_at": timezone.now().isoformat(timespec="seconds"),
        "live": usage.live,
        "filters": {
            "days": filters.days,
            "plan": filters.plan_id,
            "scope": filters.scope,
            "range": filters.range,
            "alert": filters.alert,
        },
        "series": usage.series(),
        "charts": charts(filters, rules, usage),
        "totals": usage.totals(),
        "top_clients": top_clients,
        "top_scopes": usage.top_scopes(),
        "upgrades": upgrades,
        "adaptive": adaptive_panel(),
        "budgets": budget_panel(filters.today),
    }


@staff_member_required
@permission_required(VIEW_ALL_USAGE, raise_exception=True)
def index(request: HttpRequest) -> HttpResponse:
    filters = filters_from(request)
    scopes = UsageRecord.objects.order_by("scope").values_list("scope", flat=True).distinct()
    return render(
        request,
        "dashboard/index.html",
        {
            "data": payload(filters),
            "filters": filters,
            "plans": Plan.objects.only("pk", "name"),
            "scopes": list(scopes),
            "poll_ms": POLL_SECONDS * 1000,
            "ranges": list(RANGES),
        },
    )


@staff_member_required
@permission_required(VIEW_ALL_USAGE, raise_exception=True)
def data(request: HttpRequest) -> JsonResponse:
    response = JsonResponse(payload(filters_from(request)))
    response["Cache-Control"] = "no-store"
    return response


@staff_member_required
@permission_required(VIEW_ALL_USAGE, raise_exception=True)
def client_detail(request: HttpRequest, client: str) -> HttpResponse:
    """One client: plan, live limits and budgets, last refusals, recent usage, bans and access-list entries."""
    if len(client) > MAX_TEXT or "\x00" in client:
        raise Http404("No such client.")
    sub_id = subscription_id(client)
    sub = Subscription.objects.select_related("plan", "user").filter(pk=sub_id).first() if sub_id else None
    today = usage_date(timezone.now())
    query = UsageQuery(today - timedelta(days=RECENT_DAYS - 1), today, "day", client=client)
    try:
        report = build_report(query)
    except STORE_ERRORS:  # Redis away: flushed rows only
        logger.warning("dashboard: live usage of %s unavailable", client, exc_info=True)
        report = build_report(query, live=False, today=today)
    try:
        who = Client("subscription", str(sub.pk), "{" + client + "}", subscriber_of(sub)) if sub else None
        who = who or Client(client.partition(".")[0], client.partition(".")[2], "{" + client + "}")
        standing = api.standing(who)
    except StoreUnavailable:
        standing = None
    try:
        refusals = refusal_rows(api.last_refusals(client)) if is_client_tag(client) else []
    except STORE_ERRORS:
        logger.warning("dashboard: the last refusals of %s are unavailable", client, exc_info=True)
        refusals = None
    acl = ACLEntry.objects.none()
    if sub is not None:
        match = Q(subscription=sub) | Q(api_key__subscription=sub)
        if sub.user_id:
            match |= Q(user_id=sub.user_id)
        acl = ACLEntry.objects.filter(match).select_related("api_key__subscription", "subscription", "user")
    return render(
        request,
        "dashboard/client.html",
        {
            "client": client,
            "subscription": sub,
            "standing": decorate_standing(standing),
            "report": report,
            "refusals": refusals,
            "bans": ClientBan.objects.filter(client=client)[:20],
            "acl": acl[:50],
            "keys": sub.api_keys.all() if sub else [],
        },
    )
