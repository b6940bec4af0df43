"""The client's own usage page: sign in with an API key, get a signed link to a page of your standing.

``/usage/`` takes the key in a form (POST, never in a URL) and redirects to
``/usage/<token>/``, a link signed with ``django.core.signing`` that names
the key's id and a secret of that key (an HMAC of its stored hash, which
never leaves the database): ids are sequential, so the signature alone would
be the only thing between a guessed id and a tenant's page. The link works
for ``LINK_MAX_AGE`` and stops working as soon as the key is revoked or
expires; the raw key is never stored or shown.
"""

from __future__ import annotations

import logging
from datetime import date, timedelta
from typing import Any

from django import forms
from django.core import signing
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.crypto import constant_time_compare, salted_hmac
from django.views.decorators.cache import never_cache

from plans.models import APIKey
from quotas.engine.keys import client_tag
from quotas.engine.redis_connect import STORE_ERRORS
from quotas.engine.runtime import get_engine
from quotas.engine.standing import current_standing
from quotas.exceptions import StoreUnavailable
from quotas.identity.clients import Client, hash_api_key
from usage.reports import UsageQuery, build_report

from .client_charts import client_chart, range_from
from .queries import decorate_standing
from .upgrade import day_usage, next_plan, upgrade_figures

logger = logging.getLogger(__name__)

SALT = "dashboard.usage-link"
LINK_MAX_AGE = timedelta(days=30)
CHART_DAYS = 30
#: Days the upgrade prompt's figures look back over.
UPGRADE_DAYS = 7


class KeyForm(forms.Form):
    api_key = forms.CharField(label="API key", max_length=200, widget=forms.PasswordInput(render_value=False))

    def clean_api_key(self) -> APIKey:
        raw = self.cleaned_data["api_key"].strip()
        key = APIKey.objects.usable().filter(key_hash=hash_api_key(raw)).first()
        if key is None:
            raise forms.ValidationError("This key is unknown or revoked.")
        return key


def usage_link(key: APIKey) -> str:
    """The signed path of ``key``'s usage page."""
    return reverse("usage-page:page", args=[signing.dumps([key.pk, _key_secret(key)], salt=SALT)])


def _key_secret(key: APIKey) -> str:
    return salted_hmac(SALT, key.key_hash, algorithm="sha256").hexdigest()[:32]


def _linked_key(token: str) -> APIKey | None:
    """The usable key a link names, or None (bad signature, too old, wrong secret, revoked, expired)."""
    try:
        key_id, secret = signing.loads(token, salt=SALT, max_age=LINK_MAX_AGE)
    except (signing.BadSignature, ValueError, TypeError):
        return None
    key = APIKey.objects.usable().select_related("subscription__plan").filter(pk=key_id).first()
    if key is None or not isinstance(secret, str) or not constant_time_compare(secret, _key_secret(key)):
        return None
    return key


@never_cache
def sign_in(request: HttpRequest) -> HttpResponse:
    form = KeyForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        return redirect(usage_link(form.cleaned_data["api_key"]))
    return render(request, "dashboard/usage_form.html", {"form": form})


@never_cache
def page(request: HttpRequest, token: str) -> HttpResponse:
    key = _linked_key(token)
    if key is None:
        return render(request, "dashboard/usage_form.html", {"form": KeyForm(), "expired": True}, status=403)
    engine = get_engine()
    subscriber = engine.rules.subscriber_for_key(key.key_hash)
    sub = key.subscription
    tag = client_tag("s", str(sub.pk))
    try:
        client = Client("subscription", str(sub.pk), tag, subscriber)
        standing = current_standing(client, engine.rules.current(), engine)
    except StoreUnavailable:
        standing = None
    today = timezone.now().date()
    query = UsageQuery(today - timedelta(days=CHART_DAYS - 1), today, "day", client=tag.strip("{}"))
    try:
        report = build_report(query, engine.redis)
    except STORE_ERRORS:
        report = build_report(query, None, today=today)
    rows = _every_day(report["rows"], query.start)
    chosen = range_from(request.GET.get("range"))
    chart = client_chart(chosen, rows, engine.redis, engine.prefix, tag)
    rules = engine.rules.current()
    offered = (standing or {}).get("upgrade") or {}
    target = next_plan(rules, sub.plan_id, offered.get("slug"))
    current = rules.plans.get(sub.plan_id)
    figures = None
    if target is not None and current is not None:
        figures = upgrade_figures((day_usage(r) for r in rows[-UPGRADE_DAYS:]), current, target)
    return render(
        request,
        "dashboard/usage.html",
        {
            "subscription": sub,
            "standing": decorate_standing(standing),
            "chart": chart,
            "report": report,
            "ranges": [(name, name == chart["shown"]) for name in ("1h", "24h", "7d", "30d")],
            "figures": figures,
        },
    )


def _every_day(rows: list[dict[str, Any]], start: date) -> list[dict[str, Any]]:
    """The report's rows with a zero row for each day without usage, oldest first (charts need every day)."""
    by_day = {r["day"]: r for r in rows}
    zero = {"allowed": 0, "denied": {"rate": 0, "budget": 0}, "cost": "0"}
    days = [start + timedelta(days=n) for n in range(CHART_DAYS)]
    return [by_day.get(d, {"day": d, **zero}) for d in days]
