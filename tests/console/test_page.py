"""The customer's page without a browser: what each role sees, the forms' answers, and the server's own checks
(a form hidden from a member is refused all the same)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.test import Client

from console.models import AuditEntry
from plans.models import CostBudget, SpendCap

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]


@pytest.fixture
def budgeted(team):
    CostBudget.objects.create(plan=team.subscription.plan, period="day", amount=Decimal("2.00"), currency="EUR")
    return team


def browser(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def page_url(team, tail: str = "") -> str:
    return f"/usage/account/{team.subscription.pk}/{tail}"


def test_signed_out_visitors_are_sent_to_sign_in(budgeted):
    response = Client().get(page_url(budgeted))
    assert response.status_code == 302
    assert response["Location"].startswith("/usage/account/sign-in/")


def test_an_owner_sees_the_forms_and_a_member_only_reads(budgeted):
    owner = browser(budgeted.owner).get(page_url(budgeted)).content.decode()
    assert "Set cap" in owner
    assert "Save thresholds" in owner
    assert "Audit log" in owner
    assert "2 EUR" in owner
    member = browser(budgeted.member).get(page_url(budgeted)).content.decode()
    assert "2 EUR" in member
    assert "Set cap" not in member
    assert "Save thresholds" not in member
    assert "Audit log" not in member


def test_the_index_lists_the_users_subscriptions(budgeted):
    body = browser(budgeted.member).get("/usage/account/").content.decode()
    assert "Acme" in body
    assert "member" in body


def test_an_owner_sets_and_removes_a_cap(budgeted):
    client = browser(budgeted.owner)
    response = client.post(page_url(budgeted, "cap"), {"period": "day", "amount": "1.5", "action": "set"})
    assert response.status_code == 302
    assert response["Location"].endswith("#caps")
    assert SpendCap.objects.get().amount == Decimal("1.5")
    page = client.get(response["Location"]).content.decode()
    assert "The day cap is now 1.5." in page
    client.post(page_url(budgeted, "cap"), {"period": "day", "action": "remove"})
    assert not SpendCap.objects.exists()
    assert [e.action for e in AuditEntry.objects.order_by("id")] == ["cap.set", "cap.remove"]


def test_a_bad_form_answers_400_with_its_error(budgeted):
    client = browser(budgeted.owner)
    above = client.post(page_url(budgeted, "cap"), {"period": "day", "amount": "3", "action": "set"})
    assert above.status_code == 400
    assert "At most the day budget, 2 EUR" in above.content.decode()
    words = client.post(page_url(budgeted, "thresholds"), {"percents": "half, most"})
    assert words.status_code == 400
    assert "Whole percentages" in words.content.decode()
    assert not SpendCap.objects.exists()


def test_members_are_refused_and_strangers_find_nothing(budgeted, other_team):
    member = browser(budgeted.member)
    assert member.post(page_url(budgeted, "cap"), {"period": "day", "amount": "1", "action": "set"}).status_code == 403
    assert member.post(page_url(budgeted, "thresholds"), {"percents": "50"}).status_code == 403
    stranger = browser(other_team.owner)
    assert stranger.get(page_url(budgeted)).status_code == 404
    assert stranger.post(page_url(budgeted, "thresholds"), {"percents": "50"}).status_code == 404
    assert not AuditEntry.objects.exists()


def test_a_form_without_the_csrf_token_is_refused(budgeted):
    client = Client(enforce_csrf_checks=True)
    client.force_login(budgeted.owner)
    assert client.post(page_url(budgeted, "thresholds"), {"percents": "50"}).status_code == 403
