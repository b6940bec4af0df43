"""The page itself: signing in, the list of subscriptions, one subscription's page (each section's lists and
forms), and what the sections' POST views share (:func:`owner_action`, :func:`render_page`, :func:`back`).

Who may see and do what is :mod:`console.access`'s to decide; what it raises is answered in one place,
:func:`console.pages.guard.page_errors`."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth import views as auth_views
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import NoReverseMatch, reverse
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_GET, require_POST

from notifications.conf import notification_settings
from notifications.events import EVENT_TYPES
from plans.models import APIKey
from plans.models.caps import plan_currency
from quotas.formats.money import format_money

from .. import audit, caps, contacts, keys, webhooks
from ..access import Account, account_for, require_owner, roles_of
from ..errors import ReadOnly
from ..models import AuditEntry
from .forms import OVERLAPS, CapForm, ContactForm, EndpointForm, KeyForm, ThresholdsForm
from .guard import page_errors
from .spend import moment, spend_context

#: Deliveries the page lists per endpoint, newest first (the API lists more).
DELIVERIES_SHOWN = 5
#: Characters of a receiver's answer the page shows.
ANSWER_SHOWN = 80

#: What each destructive action does, said before it is done: on the page, beside its button, and on the
#: confirmation step (:func:`unconfirmed`).
CONSEQUENCES = {
    "revoke": "Requests with it are refused within a second, for good: a revoked key cannot be restored.",
    "webhook": "Nothing more is sent to it, and its deliveries are deleted with it.",
    "contact": "It is sent nothing more; adding it again mails it a new confirmation link.",
    "cap": "Your spending is then held by the plan's budget alone, from the next second.",
}

Action = Callable[..., HttpResponse]


class SignInView(auth_views.LoginView):
    """Owners and members sign in with their Django user (never with an API key: a key cannot manage)."""

    template_name = "console/sign_in.html"
    redirect_authenticated_user = True

    def get_default_redirect_url(self) -> str:
        return reverse("console-page:index")


@require_GET
@page_errors
def index(request: HttpRequest) -> HttpResponse:
    """The subscriptions the signed-in user has a role on."""
    return render(request, "console/index.html", {"rows": roles_of(request.user)})


@require_GET
@page_errors
def subscription(request: HttpRequest, subscription_id: int) -> HttpResponse:
    """One subscription: its caps, thresholds, keys, webhooks, contacts and (owners) audit log, with the forms
    the caller may use."""
    return render_page(request, account_for(request.user, subscription_id))


def owner_action(view: Action) -> Action:
    """A section's POST view: signed in (else to sign-in), an owner of the URL's subscription (a member: 403; a
    stranger: 404), called with the :class:`~console.access.Account`; an object of another subscription is a
    404 as a missing one (:func:`~console.pages.guard.page_errors` answers each)."""

    @require_POST
    @page_errors
    @wraps(view)
    def guarded(request: HttpRequest, subscription_id: int, **ids: int) -> HttpResponse:
        return view(request, require_owner(account_for(request.user, subscription_id)), **ids)

    return guarded


def render_page(
    request: HttpRequest,
    account: Account,
    status: int = 200,
    *,
    failed: tuple[str, list[str]] | None = None,
    revealed: dict[str, str] | None = None,
    **forms_given: Any,
) -> HttpResponse:
    """The subscription's page: ``failed`` is a section and the errors shown in it, ``revealed`` a key or secret
    shown once (its ``section``, ``title``, ``value`` and ``note``), ``forms_given`` the bound forms kept as the
    caller filled them in (``key_form``, ``endpoint_form``, ``contact_form``, ``cap_form``,
    ``thresholds_form``)."""
    periods = caps.periods_of(account)
    thresholds = caps.caps_of(account, spend=False)["thresholds"]
    # Each key's subscription is this one: read once (a key's cap and currency need its plan), not once a key.
    subscription_keys = list(keys.keys_of(account).select_related("subscription__plan"))
    spent = spend_context(account.subscription, periods, subscription_keys)
    context = {
        "account": account,
        "subscription": account.subscription,
        "periods": [_period_row(p) for p in periods],
        **spent,
        "usage_page": _usage_page(),
        "thresholds": thresholds,
        "cap_form": forms_given.get("cap_form") or CapForm(),
        "thresholds_form": forms_given.get("thresholds_form")
        or ThresholdsForm(initial={"percents": ", ".join(str(p) for p in thresholds)}),
        "keys": [_key_row(key, periods, spent["key_spend"]) for key in subscription_keys],
        "key_form": forms_given.get("key_form") or KeyForm(),
        "endpoints": [(endpoint, _deliveries(endpoint)) for endpoint in webhooks.endpoints_of(account)],
        "endpoint_form": forms_given.get("endpoint_form") or EndpointForm(),
        "contacts": contacts.contacts_of(account),
        "contact_form": forms_given.get("contact_form") or ContactForm(),
        "max_endpoints": notification_settings.MAX_ENDPOINTS,
        "max_contacts": notification_settings.MAX_CONTACTS,
        "overlaps": OVERLAPS,
        "consequences": CONSEQUENCES,
        "event_types": EVENT_TYPES,
        "failed": {"section": failed[0], "errors": failed[1]} if failed else None,
        "revealed": revealed,
        "audit": _audit(account),
    }
    response = render(request, "console/subscription.html", context, status=status)
    if revealed:
        add_never_cache_headers(response)  # Cache-Control: no-store, so no browser or proxy cache keeps the secret
    return response


def unconfirmed(
    request: HttpRequest,
    account: Account,
    section: str,
    *,
    question: str,
    consequence: str,
    button: str,
    keep: dict[str, str] | None = None,
) -> HttpResponse | None:
    """A destructive POST's confirmation step, served by the server so it works without JavaScript: None once
    the POST carries ``confirmed=yes`` (the page's own button, shown by opening its ``<details>``, or this
    step's), else the step itself: ``question``, ``consequence``, a ``button`` that sends the same POST again
    confirmed (with the fields of ``keep``), and a way back to ``section``. Nothing is changed before it."""
    if request.POST.get("confirmed") == "yes":
        return None
    context = {
        "subscription": account.subscription,
        "question": question,
        "consequence": consequence,
        "button": button,
        "action": request.path,
        "keep": sorted((keep or {}).items()),
        "back": reverse("console-page:subscription", args=[account.subscription.pk]) + f"#{section}",
    }
    return render(request, "console/confirm_action.html", context)


def back(account: Account, section: str) -> HttpResponseRedirect:
    """The redirect of a POST that worked: to its section of the page (the message is the caller's)."""
    return HttpResponseRedirect(reverse("console-page:subscription", args=[account.subscription.pk]) + f"#{section}")


def key_state(key: APIKey) -> str:
    """A key's state in words that cannot be misread: a revoked key says when it was revoked (never the expiry
    it no longer works until), a rolled one until when it still works, an active one when it expires."""
    if key.revoked_at is not None:
        return f"Revoked {moment(key.revoked_at)}"
    if key.is_expired:
        return f"Expired {moment(key.expires_at)}" if key.expires_at else "Expired"
    until = moment(key.expires_at) if key.expires_at else None
    if key.rolled_to_id is not None:
        return f"Rolled: works until {until}" if until else "Rolled"
    return f"Active, expires {until}" if until else "Active"


def _period_row(period: caps.Period) -> dict[str, Any]:
    """A period's row of the caps form: its budget and cap as money, and the cap's amount for the input."""
    return {
        "period": period.period,
        "budget": format_money(period.budget, period.currency) if period.budget is not None else None,
        "cap": format_money(period.cap, period.currency) if period.cap is not None else None,
        "cap_value": caps.money(period.cap) or "",
        "cap_alone": period.budget is None,
    }


def _key_row(key: APIKey, periods: list[caps.Period], spend_rows: dict[int, Any]) -> dict[str, Any]:
    """A key's row: the key, its state in words, its own cap as money (in its subscription's currency: the
    period's, else the plan's) and that cap's spend row (None: no cap, revoked, or the ledger unread)."""
    cap = ""
    if key.cap_amount is not None:
        currency = next((p.currency for p in periods if p.period == key.cap_period), None)
        cap = format_money(key.cap_amount, currency or plan_currency(key.subscription.plan_id))
    return {"key": key, "state": key_state(key), "cap": cap, "cap_value": caps.money(key.cap_amount) or "",
            "spend": spend_rows.get(key.pk)}  # fmt: skip


def _usage_page() -> str | None:
    """The usage page's address (its charts), when the project mounts it: the two pages link to each other."""
    try:
        return reverse("usage-page:sign-in")
    except NoReverseMatch:
        return None


def _audit(account: Account) -> QuerySet[AuditEntry] | None:
    """The log the caller may read (:func:`console.audit.log_of` decides), else None: no section."""
    try:
        return audit.log_of(account)
    except ReadOnly:
        return None


def _deliveries(endpoint: Any) -> list[dict[str, Any]]:
    return [
        {
            "delivery": d,
            "answer": d.response_body[:ANSWER_SHOWN],
            "failure": d.get_failure_display() if d.failure else "",
        }
        for d in webhooks.deliveries_of(endpoint, DELIVERIES_SHOWN)
    ]
