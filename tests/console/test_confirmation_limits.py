"""Confirmation mails are limited per address of a subscription (``CONFIRMATION_INTERVAL``: one every ten
minutes) and per subscription (``CONFIRMATIONS_PER_HOUR``: 20 in a sliding hour), counted in the database in the
change's transaction: over a limit the API answers 429 with ``Retry-After`` and a problem naming the limit, the
page says when to try again, and nothing is mailed, added, changed or audited. Time moves with ``quota_clock``
(the engine's clock, which the console reads); mails are Django's test outbox."""

from __future__ import annotations

import pytest
from django.core import mail
from django.core.checks import Error
from django.test import Client

from config.embedded_redis import free_port
from console.models import AuditEntry, ConfirmationMail
from notifications.models import Contact
from quotas.checks import check_settings

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]

TYPE = "too-many-confirmation-mails"


@pytest.fixture(autouse=True)
def no_console_rate(set_quotas):
    """The console's own rate limit (60/min) off: only the mail limits refuse here."""
    set_quotas("CONSOLE", API_RATE=None)


def add(api, team, email: str):
    return api.post(team.url("contacts"), {"email": email}, format="json")


def resend(api, team, contact_id: int):
    return api.post(team.url(f"contacts/{contact_id}/resend_confirmation"))


def refused(response, per: str, mails: int, seconds: int) -> int:
    """Assert ``response`` is the 429 of the ``per`` limit; its Retry-After."""
    assert response.status_code == 429, response.content
    assert response["Content-Type"] == "application/problem+json"
    body = response.json()
    assert body["type"].endswith(TYPE)
    assert body["limit"] == {"per": per, "mails": mails, "seconds": seconds}
    assert body["retry_after"] == int(response["Retry-After"])
    return int(response["Retry-After"])


def test_one_address_is_mailed_one_link_per_interval(team, owner_api, quota_clock):
    """A resend within ten minutes of the last mail is a 429 that mails nothing and audits nothing; at ten
    minutes it is mailed."""
    made = add(owner_api, team, "ops@acme.example").json()
    assert len(mail.outbox) == 1
    wait = refused(resend(owner_api, team, made["id"]), "address", 1, 600)
    assert 590 < wait <= 600
    assert "less than 10 minutes ago" in resend(owner_api, team, made["id"]).json()["detail"]
    quota_clock.advance(599.5)
    assert refused(resend(owner_api, team, made["id"]), "address", 1, 600) == 1
    assert len(mail.outbox) == 1
    assert [e.action for e in AuditEntry.objects.all()] == ["contact.create"]
    quota_clock.advance(0.5)  # ten minutes after the last mail
    assert resend(owner_api, team, made["id"]).status_code == 200
    assert len(mail.outbox) == 2


def test_the_address_is_counted_not_the_contact(team, owner_api):
    """Deleting a contact and adding it again, or giving another contact the address (in any case), is refused
    as a resend would be: the contact is not added, nor its address changed."""
    first = add(owner_api, team, "ops@acme.example").json()
    other = add(owner_api, team, "cfo@acme.example").json()
    assert owner_api.delete(team.url(f"contacts/{first['id']}")).status_code == 204
    refused(add(owner_api, team, "ops@acme.example"), "address", 1, 600)
    changed = owner_api.patch(team.url(f"contacts/{other['id']}"), {"email": "OPS@acme.example"}, format="json")
    refused(changed, "address", 1, 600)
    assert list(Contact.objects.values_list("email", flat=True)) == ["cfo@acme.example"]
    assert len(mail.outbox) == 2


def test_a_subscription_is_mailed_at_most_its_hourly_links(team, other_team, owner_api, stranger_api, set_quotas,
                                                           quota_clock):  # fmt: skip
    """Past CONFIRMATIONS_PER_HOUR in a sliding hour every address is refused, new or not, until the oldest mail
    leaves the hour; another subscription is not counted with it."""
    set_quotas("CONSOLE", API_RATE=None, CONFIRMATIONS_PER_HOUR=3)
    for n in range(3):
        assert add(owner_api, team, f"ops{n}@acme.example").status_code == 201
    wait = refused(add(owner_api, team, "ops3@acme.example"), "subscription", 3, 3600)
    assert 3590 < wait <= 3600
    assert "3 confirmation links mailed in the last hour" in add(owner_api, team, "x@acme.example").json()["detail"]
    assert Contact.objects.filter(subscription=team.subscription).count() == 3
    assert len(mail.outbox) == 3
    assert add(stranger_api, other_team, "ops@globex.example").status_code == 201
    quota_clock.advance(3600)
    assert add(owner_api, team, "ops3@acme.example").status_code == 201
    assert len(mail.outbox) == 5
    assert ConfirmationMail.objects.filter(subscription=team.subscription).count() == 1  # the hour's only


def test_the_page_says_when_to_try_again_and_adds_nothing(team, owner_api, set_quotas):
    set_quotas("CONSOLE", API_RATE=None, CONFIRMATIONS_PER_HOUR=1)
    add(owner_api, team, "ops@acme.example")
    page = Client()
    page.force_login(team.owner)
    answer = page.post(f"/usage/account/{team.subscription.pk}/contacts", {"email": "cfo@acme.example"})
    assert answer.status_code == 429
    assert 3590 < int(answer["Retry-After"]) <= 3600
    text = answer.content.decode()
    assert "1 confirmation links mailed in the last hour, its limit: try again in 60 minutes" in text
    assert 'value="cfo@acme.example"' in text  # the form stays filled in
    assert list(Contact.objects.values_list("email", flat=True)) == ["ops@acme.example"]
    assert len(mail.outbox) == 1


def test_a_mail_the_server_did_not_take_is_not_counted(team, owner_api, settings):
    """The mail server refuses (SMTP to a loopback port nothing listens on): the contact is added, unconfirmed,
    and a resend may follow at once."""
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", free_port(), 2
    made = add(owner_api, team, "ops@acme.example").json()
    assert made["confirmation_sent"] is False
    assert not ConfirmationMail.objects.exists()
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    assert resend(owner_api, team, made["id"]).json()["confirmation_sent"] is True
    assert len(mail.outbox) == 1


def test_none_turns_each_limit_off(team, owner_api, set_quotas):
    set_quotas("CONSOLE", API_RATE=None, CONFIRMATION_INTERVAL=None, CONFIRMATIONS_PER_HOUR=None)
    made = add(owner_api, team, "ops@acme.example").json()
    for _ in range(25):
        assert resend(owner_api, team, made["id"]).status_code == 200
    assert len(mail.outbox) == 26


@pytest.mark.parametrize(
    ("values", "check_id"),
    [
        ({"CONFIRMATION_INTERVAL": 0}, "quota_console.E002"),
        ({"CONFIRMATION_INTERVAL": "10m"}, "quota_console.E002"),
        ({"CONFIRMATIONS_PER_HOUR": 0}, "quota_console.E003"),
        ({"CONFIRMATIONS_PER_HOUR": 2.5}, "quota_console.E003"),
    ],
)
def test_a_bad_setting_is_a_start_up_error(set_quotas, values, check_id):
    set_quotas("CONSOLE", **values)
    errors = [m for m in check_settings() if isinstance(m, Error)]
    assert [e.id for e in errors] == [check_id]
