"""The customer's page in headless Chromium: an owner signs in, sets a cap and thresholds with the page's plain
forms (no JavaScript needed), and sees them; a member of the same subscription sees no form. Each step checks
what was saved, so a broken form (a wrong field name, a missing token, a wrong action) fails the test."""

from __future__ import annotations

from decimal import Decimal

import pytest

from console.models import AuditEntry, Membership, Role
from plans.models import AlertThresholds, CostBudget, SpendCap
from tests.dashboard.browser import ARTIFACTS, PASSWORD
from tests.factories import PlanFactory, SubscriptionFactory, UserFactory

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def acme(transactional_db):
    owner, member = UserFactory(username="olivia"), UserFactory(username="max")
    subscription = SubscriptionFactory(name="Acme", user=owner, plan=PlanFactory(slug="pro"))
    CostBudget.objects.create(plan=subscription.plan, period="day", amount=Decimal("2.00"), currency="EUR")
    Membership.objects.create(subscription=subscription, user=member, role=Role.MEMBER)
    return subscription


@pytest.fixture
def page(chromium):
    """A page with JavaScript off: the forms are plain HTML and must work without a script."""
    ARTIFACTS.mkdir(exist_ok=True)
    context = chromium.new_context(viewport={"width": 1000, "height": 900}, java_script_enabled=False)
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()


def sign_in(page, base: str, username: str) -> None:
    page.goto(f"{base}/usage/account/sign-in/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/usage/account/")


def test_an_owner_sets_a_cap_and_thresholds_with_the_pages_forms(page, live_server, acme):
    base = live_server.url
    sign_in(page, base, "olivia")
    page.click("text=Acme")
    page.wait_for_url(f"{base}/usage/account/{acme.pk}/")
    assert page.inner_text("#role") == "owner"

    page.fill("input[aria-label='day cap']", "1.25")
    page.click("tr[data-period=day] button[value=set]")
    page.wait_for_url(f"**/usage/account/{acme.pk}/#caps")
    assert "The day cap is now 1.25." in page.inner_text(".messages")
    assert page.inner_text("tr[data-period=day] .cap") == "1.25 EUR"
    assert SpendCap.objects.get(subscription=acme).amount == Decimal("1.25")

    page.fill("input[aria-label='day cap']", "5")  # above the plan's budget: refused, with the reason
    page.click("tr[data-period=day] button[value=set]")
    assert "At most the day budget, 2 EUR" in page.inner_text("#caps .errors")
    assert SpendCap.objects.get(subscription=acme).amount == Decimal("1.25")

    page.goto(f"{base}/usage/account/{acme.pk}/")
    page.fill("#id_percents", "90, 50")
    page.click("#thresholds button[type=submit]")
    page.wait_for_url(f"**/usage/account/{acme.pk}/#thresholds")
    assert page.inner_text("#thresholds-now") == "50 %, 90 %"
    assert AlertThresholds.objects.get(subscription=acme).percents == [50, 90]
    assert "thresholds.set" in page.inner_text("#audit")
    assert list(AuditEntry.objects.values_list("actor_name", flat=True)) == ["olivia", "olivia"]
    page.screenshot(path=ARTIFACTS / "console-owner.png", full_page=True)


def test_a_member_reads_without_forms(page, live_server, acme):
    base = live_server.url
    sign_in(page, base, "max")
    page.goto(f"{base}/usage/account/{acme.pk}/")
    assert page.inner_text("#role") == "member"
    assert page.locator("form button[value=set]").count() == 0
    assert page.locator("#id_percents").count() == 0
    assert "2 EUR" in page.inner_text("#caps")
