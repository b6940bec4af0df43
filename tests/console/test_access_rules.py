"""Where the console's access is decided: once, in :mod:`console.access` (plain exceptions that know no HTTP),
asked by one permission class on every API view and translated once per front door; who reads the audit log,
once; a key's limits set by one action; each field's rules written once for the API and the page."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.contrib.auth.models import AnonymousUser
from django.test import RequestFactory
from django.urls import URLPattern
from rest_framework.exceptions import APIException
from rest_framework.permissions import AllowAny
from rest_framework.test import APIClient

from console import access, audit, key_limits
from console import urls as console_urls
from console.api import caps as caps_api
from console.api import contacts as contacts_api
from console.api import key_limits as key_limits_api
from console.api import keys as keys_api
from console.api import webhooks as webhooks_api
from console.api.permissions import ConsoleAccess
from console.errors import Missing, NoSuchSubscription, NotSignedIn, ReadOnly
from console.models import AuditEntry
from console.pages import forms
from plans.models import APIKey

from .conftest import signed_in

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]


def views() -> dict[str, type]:
    return {str(p.pattern): p.callback.view_class for p in console_urls.urlpatterns if isinstance(p, URLPattern)}  # type: ignore[attr-defined]


def test_every_api_view_has_the_consoles_permission_class():
    """No view leaves its permission to its handlers: ConsoleAccess on each, AllowAny on the confirmation's
    (no sign-in: the token is the credential)."""
    found = views()
    assert len(found) > 15
    for route, view in found.items():
        expected = [AllowAny] if route == "contacts/confirm" else [ConsoleAccess]
        assert view.permission_classes == expected, route


def test_access_raises_plain_errors_that_know_no_http(team, other_team):
    """401, 404 and 403 are the front doors' words: access says not signed in, no such subscription, read only."""
    for error in (NotSignedIn, NoSuchSubscription, ReadOnly):
        assert not issubclass(error, APIException)
    assert issubclass(NoSuchSubscription, Missing)  # a 404 as any object of another subscription
    with pytest.raises(NotSignedIn):
        access.account_for(AnonymousUser(), team.subscription.pk)
    with pytest.raises(NoSuchSubscription):
        access.account_for(other_team.owner, team.subscription.pk)
    with pytest.raises(NoSuchSubscription):
        access.account_for(team.owner, 999_999)
    with pytest.raises(ReadOnly, match="Members may read"):
        access.require_owner(access.account_for(team.member, team.subscription.pk))
    owner = access.account_for(team.owner, team.subscription.pk)
    assert access.require_owner(owner) is owner


def test_the_apis_401_keeps_its_challenge(team):
    """A NotSignedIn is translated before DRF handles it: the 401 names the API key header to send."""
    refused = APIClient().get(team.url("keys"))
    assert refused.status_code == 401
    assert refused["WWW-Authenticate"] == 'ApiKey header="X-API-Key"'
    assert refused["Content-Type"] == "application/problem+json"


def test_a_refused_caller_spends_the_consoles_allowance(team, other_team, set_quotas):
    """The console's throttle counts before the permission check: probing others' subscriptions is held to it."""
    set_quotas("CONSOLE", API_RATE="2/min")
    stranger = signed_in(other_team.owner)
    statuses = [stranger.get(team.url("keys")).status_code for _ in range(3)]
    assert statuses == [404, 404, 429]


def test_the_audit_log_is_its_owners_alone(team):
    """One rule (console.audit.log_of) for the API's 403 and the page's missing section."""
    AuditEntry.objects.create(subscription=team.subscription, subscription_name="Acme", actor_name="olivia",
                              action="key.create")  # fmt: skip
    owner = access.account_for(team.owner, team.subscription.pk)
    assert [e.action for e in audit.log_of(owner)] == ["key.create"]
    member = access.account_for(team.member, team.subscription.pk)
    its_key = access.Account(team.subscription, None, None)  # as account_for finds a key's holder
    for reader in (member, its_key):
        with pytest.raises(ReadOnly):
            audit.log_of(reader)


def test_a_keys_limits_are_set_by_one_action_that_finds_and_locks_the_key(team, other_team):
    """Another subscription's key is missing; nothing is changed or audited."""
    request = RequestFactory().post("/")
    mine = access.account_for(team.owner, team.subscription.pk)
    theirs = APIKey.objects.get(subscription=other_team.subscription)
    with pytest.raises(Missing):
        key_limits.set_key_limits(request, mine, theirs.pk, own_rates="1/min")
    theirs.refresh_from_db()
    assert theirs.own_rates == ""
    key = APIKey.objects.get(subscription=team.subscription)
    done = key_limits.set_key_limits(request, mine, key.pk, own_rates=" 5/min ", cap_period="", cap_amount=None)
    assert (done.pk, APIKey.objects.get(pk=key.pk).own_rates) == (key.pk, "5/min")
    assert AuditEntry.objects.get().action == "key.limits"


RULES = ("max_length", "max_digits", "decimal_places", "min_value", "max_value")


@pytest.mark.parametrize(
    ("serializer_field", "form_field"),
    [
        (caps_api.CapSerializer().fields["amount"], forms.CapForm().fields["amount"]),
        (keys_api.CreateSerializer().fields["name"], forms.KeyForm().fields["name"]),
        (keys_api.RollSerializer().fields["name"], forms.KeyForm().fields["name"]),
        (key_limits_api.KeyLimitsSerializer().fields["own_rates"], forms.KeyLimitsForm().fields["own_rates"]),
        (key_limits_api.KeyCapSerializer().fields["amount"], forms.KeyLimitsForm().fields["cap_amount"]),
        (webhooks_api.EndpointInputSerializer().fields["url"], forms.EndpointForm().fields["url"]),
        (webhooks_api.EndpointInputSerializer().fields["description"], forms.EndpointForm().fields["description"]),
        (contacts_api.ContactInputSerializer().fields["email"], forms.ContactForm().fields["email"]),
    ],
    ids=["cap", "key-name", "roll-name", "own-rates", "key-cap", "url", "description", "email"],
)
def test_the_api_and_the_page_hold_a_field_to_the_same_rules(serializer_field, form_field):
    """Both are built from console.fields, read from the models: the same lengths, digits and bounds."""
    for rule in RULES:
        assert getattr(serializer_field, rule, None) == getattr(form_field, rule, None), rule


def test_a_keys_cap_periods_and_the_page_overlaps_are_the_apis():
    offered = [value for value, _ in forms.KeyLimitsForm().fields["cap_period"].choices if value]
    assert offered == list(key_limits_api.KeyCapSerializer().fields["period"].choices) == ["day", "month"]
    most = keys_api.RollSerializer().fields["overlap_seconds"].max_value
    assert all(0 <= seconds <= most for seconds, _ in forms.OVERLAPS)
    assert forms.CapForm().fields["amount"].min_value == Decimal(0)
