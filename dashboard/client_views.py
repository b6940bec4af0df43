"""The client's own usage page: sign in with an API key, then read your standing.

``/usage/`` takes the key in a form (POST, never in a URL) and looks it up
the way the API does (:func:`quotas.identity.clients.authenticate_key`: the
rules snapshot, the cache of unknown keys, failures counted against the
client address, unknown keys refused while the address is blocked). A good
key signs the browser in: the session (cycled) remembers the key's id and a
secret of that key (an HMAC of its stored hash, which never leaves the
database), and ``/usage/me/`` shows the page. No token ever appears in a URL,
so none reaches an access log, a browser history or a Referer header.

The sign-in lasts ``SIGN_IN_MAX_AGE`` and ends as soon as the key is revoked
or expires; a revoked key stays revoked (see ``plans.models.APIKey.clean``),
so revoking ends every sign-in of that key for good. Both views are limited
per client address (``PAGE_RATE``), apart from any plan.
"""

from __future__ import annotations

import logging
import time
from datetime import date, timedelta
from typing import Any

from django import forms
from django.apps import apps
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.utils.crypto import constant_time_compare, salted_hmac
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from plans.models import APIKey
from quotas import api
from quotas.api import Client
from quotas.exceptions import AuthThrottled, InvalidAPIKey, StoreUnavailable
from quotas.formats.rates import parse_rates
from quotas.internal_api import (
    STORE_ERRORS,
    address_group,
    authenticate_key_now,
    client_tag,
    page_wait,
    rules_snapshot,
    subscriber_for_key,
    usage_date,
)
from quotas.rules.limits import LimitRule
from usage.reports import UsageQuery, build_report
from usage.rows import counters

from .client_charts import client_chart, range_from
from .queries import decorate_standing
from .upgrade import day_usage, next_plan, upgrade_figures

logger = logging.getLogger(__name__)

SALT = "dashboard.usage-sign-in"
#: How long one sign-in lasts (the session may last longer: the usage page asks for the key again).
SIGN_IN_MAX_AGE = timedelta(hours=12)
#: Requests to the sign-in form and the page per client address, whatever the plans say: a person
#: reads the page, a script uses the usage API.
PAGE_RATE = "60/min"
SESSION_KEY = "quota_usage_sign_in"
CHART_DAYS = 30
#: Deliveries (webhooks and e-mails) the usage page lists, newest first.
NOTIFICATIONS_SHOWN = 10
#: Days the upgrade prompt's figures look back over.
UPGRADE_DAYS = 7
_PAGE_RULE = LimitRule(id="usage-page", name="usage-page", rates=parse_rates(PAGE_RATE), algorithm="fixed_window")


class KeyForm(forms.Form):
    api_key = forms.CharField(label="API key", max_length=200, widget=forms.PasswordInput(render_value=False))


def _key_secret(key_hash: str) -> str:
    return salted_hmac(SALT, key_hash, algorithm="sha256").hexdigest()[:32]


def _page_wait(request: HttpRequest) -> int:
    """Seconds this address must wait before its next page view (0: now); open while Redis is down."""
    return page_wait(client_tag("up", address_group(request)), _PAGE_RULE)


def _form_page(request: HttpRequest, form: KeyForm, status: int = 200, wait: int = 0, **context: Any) -> HttpResponse:
    response = render(request, "dashboard/usage_form.html", {"form": form, "wait": wait, **context}, status=status)
    if wait:
        response.headers["Retry-After"] = str(wait)
    return response


def _signed_in_key(request: HttpRequest) -> APIKey | None:
    """The usable key this browser signed in with, or None (never, too long ago, revoked, expired)."""
    signed = request.session.get(SESSION_KEY)
    if not isinstance(signed, dict) or not isinstance(signed.get("at"), int | float):
        return None
    if time.time() - signed["at"] > SIGN_IN_MAX_AGE.total_seconds():
        return None
    key = APIKey.objects.usable().select_related("subscription__plan").filter(pk=signed.get("key")).first()
    secret = signed.get("secret")
    if key is None or not isinstance(secret, str) or not constant_time_compare(secret, _key_secret(key.key_hash)):
        return None
    return key


@never_cache
def sign_in(request: HttpRequest) -> HttpResponse:
    """The key form; a good key signs the browser in and redirects to the page."""
    wait = _page_wait(request)
    if wait:
        return _form_page(request, KeyForm(), status=429, wait=wait)
    if request.method != "POST":
        return _form_page(request, KeyForm())
    form = KeyForm(request.POST)
    try:
        key = _key_signing_in(request, form)
    except AuthThrottled as exc:
        return _form_page(request, KeyForm(), status=429, wait=int(exc.wait or 1))
    if key is None:
        return _form_page(request, form)
    request.session.cycle_key()  # a new session id on signing in (session fixation)
    request.session[SESSION_KEY] = {"key": key.pk, "secret": _key_secret(key.key_hash), "at": time.time()}
    return redirect("usage-page:page")


def _key_signing_in(request: HttpRequest, form: KeyForm) -> APIKey | None:
    """The key the sign-in ``form`` gives, or None with the form's errors saying why.

    Raises :class:`AuthThrottled` while the address is past its failed authentications.
    """
    if not form.is_valid():
        return None
    try:
        client = authenticate_key_now(request, form.cleaned_data["api_key"])
    except InvalidAPIKey:
        client = None
    key_id = client.subscriber.key_id if client is not None and client.subscriber is not None else None
    key = APIKey.objects.filter(pk=key_id).only("key_hash").first() if key_id is not None else None
    if key is None:  # unknown, revoked or expired, or deleted since the snapshot cached it
        form.add_error("api_key", "This key is unknown, revoked or expired.")
    return key


@require_POST
def sign_out(request: HttpRequest) -> HttpResponse:
    """Forget this browser's sign-in."""
    request.session.pop(SESSION_KEY, None)
    return redirect("usage-page:sign-in")


@never_cache
def page(request: HttpRequest) -> HttpResponse:
    """The signed-in key's standing, usage chart and upgrade figures."""
    wait = _page_wait(request)
    if wait:
        return _form_page(request, KeyForm(), status=429, wait=wait)
    key = _signed_in_key(request)
    if key is None:
        request.session.pop(SESSION_KEY, None)
        return _form_page(request, KeyForm(), status=403, expired=True)
    subscriber = subscriber_for_key(key.key_hash)
    sub = key.subscription
    tag = client_tag("s", str(sub.pk))
    try:
        client = Client("subscription", str(sub.pk), tag, subscriber)
        standing = api.standing(client)
    except StoreUnavailable:
        standing = None
    today = usage_date(timezone.now())
    query = UsageQuery(today - timedelta(days=CHART_DAYS - 1), today, "day", client=tag.strip("{}"))
    try:
        report = build_report(query)
    except STORE_ERRORS:
        report = build_report(query, live=False, today=today)
    rows = _every_day(report["rows"], query.start)
    chosen = range_from(request.GET.get("range"))
    chart = client_chart(chosen, rows, tag)
    rules = rules_snapshot()
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
            "notifications": _notifications(sub.pk),
            "account_page": _account_page(),
        },
    )


def _account_page() -> str | None:
    """The customer console's page (caps, keys, alerts), when the project mounts it: the two pages link to each
    other."""
    try:
        return reverse("console-page:index")
    except NoReverseMatch:
        return None


def _notifications(subscription_id: int) -> dict[str, Any] | None:
    """The subscription's webhooks and latest deliveries, when the notifications app is installed."""
    if not apps.is_installed("notifications"):
        return None
    from notifications.summary import summary  # an optional app: imported only where it is installed

    return summary(subscription_id, latest=NOTIFICATIONS_SHOWN)


def _every_day(rows: list[dict[str, Any]], start: date) -> list[dict[str, Any]]:
    """The report's rows with a zero row for each day without usage, oldest first (charts need every day)."""
    by_day = {r["day"]: r for r in rows}
    zero = counters(0, dict.fromkeys(("rate", "budget", "acl", "capacity", "banned"), 0), weight=0, cost="0")
    days = [start + timedelta(days=n) for n in range(CHART_DAYS)]
    return [by_day.get(d, {"day": d, **zero}) for d in days]
