"""The customer's page in headless Chromium: an owner signs in, sets a cap and thresholds, creates, rolls and
revokes API keys, registers and tests a webhook at a real receiver and adds a contact, all with the page's plain
forms (no JavaScript needed), and sees them; a member of the same subscription sees no form. Each step checks
what was saved, so a broken form (a wrong field name, a missing token, a wrong action) fails the test."""

from __future__ import annotations

from decimal import Decimal

import pytest

from console.models import AuditEntry, Membership, Role
from notifications.dispatch import dispatch_due
from notifications.models import Contact, Delivery, Endpoint
from notifications.secrets import decrypt
from plans.models import AlertThresholds, APIKey, CostBudget, KeyState, SpendCap
from quotas.internal_api import hash_api_key
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
    assert "The day cap is now 1.25 EUR." in page.inner_text(".messages")
    assert page.inner_text("tr[data-period=day] .cap") == "1.25 EUR"
    assert SpendCap.objects.get(subscription=acme).amount == Decimal("1.25")

    page.fill("input[aria-label='day cap']", "5")  # above the plan's budget: refused, with the reason
    page.click("tr[data-period=day] button[value=set]")
    assert "At most the day budget, 2.00 EUR" in page.inner_text("#caps .errors")
    assert SpendCap.objects.get(subscription=acme).amount == Decimal("1.25")

    page.goto(f"{base}/usage/account/{acme.pk}/")
    page.fill("#id_percents", "90, 50")
    page.click("#thresholds button[type=submit]")
    page.wait_for_url(f"**/usage/account/{acme.pk}/#thresholds")
    assert page.inner_text("#thresholds-now") == "50 %, 90 %"
    assert AlertThresholds.objects.get(subscription=acme).percents == [50, 90]
    assert "thresholds.set" in page.inner_text("#audit")
    assert list(AuditEntry.objects.values_list("actor_name", flat=True)) == ["olivia", "olivia"]
    page.screenshot(path=ARTIFACTS / "console-owner-caps.png", full_page=True)


def test_an_owner_runs_keys_webhooks_and_contacts_with_the_pages_forms(page, live_server, acme, receiver,
                                                                       internal_allowed):  # fmt: skip
    """A key created is shown once (and never on the page again), rolled with a day's overlap, the old one
    revoked; an endpoint at the real receiver registered with its secret shown once and tested (queued, then
    the receiver's 200 on the page once the dispatcher sent it); a contact added, unconfirmed."""
    here = f"{live_server.url}/usage/account/{acme.pk}/"
    sign_in(page, live_server.url, "olivia")
    page.goto(here)
    create_roll_and_revoke_a_key(page, here, acme)
    register_and_test_an_endpoint(page, here, acme, receiver)
    add_a_contact(page, here, acme)
    assert list(AuditEntry.objects.order_by("id").values_list("action", flat=True)) == [
        "key.create", "key.roll", "key.revoke", "webhook.create", "webhook.test", "contact.create"]  # fmt: skip

    page.goto(here)
    page.screenshot(path=ARTIFACTS / "console-owner.png", full_page=True)


def create_roll_and_revoke_a_key(page, here: str, acme) -> None:
    page.fill("#key-name", "ci")
    page.click("#key-create button[type=submit]")
    page.wait_for_url(f"{here}keys")
    raw = page.inner_text("#keys #secret")
    first = APIKey.objects.get(key_hash=hash_api_key(raw))
    assert (first.subscription, first.name) == (acme, "ci")
    page.goto(here)
    assert raw not in page.content()  # shown once: the page itself never holds it
    assert page.inner_text(f"tbody[data-key='{first.prefix}'] .state") == "Active"

    page.select_option(f"select[aria-label='overlap of {first.prefix}']", "86400")
    page.click(f"tbody[data-key='{first.prefix}'] button.roll")
    page.wait_for_url(f"{here}keys/{first.pk}/roll")
    second = APIKey.objects.get(key_hash=hash_api_key(page.inner_text("#keys #secret")))
    first.refresh_from_db()
    assert (first.rolled_to, first.state) == (second, KeyState.ROLLED)
    page.goto(here)
    assert page.inner_text(f"tbody[data-key='{first.prefix}'] .state").startswith("Rolled: works until ")
    assert not page.is_visible(f"tbody[data-key='{first.prefix}'] button.revoke")  # asks first: no script needed
    page.click(f"tbody[data-key='{first.prefix}'] summary.revoke")
    assert "refused within a second" in page.inner_text(f"tbody[data-key='{first.prefix}'] details.confirm")
    page.click(f"tbody[data-key='{first.prefix}'] button.revoke")
    page.wait_for_url(f"{here}#keys")
    assert "is revoked" in page.inner_text(".messages")
    assert page.inner_text(f"tbody[data-key='{first.prefix}'] .state").startswith("Revoked ")
    assert APIKey.objects.get(pk=first.pk).revoked_at is not None
    assert APIKey.objects.get(pk=second.pk).state == KeyState.ACTIVE


def register_and_test_an_endpoint(page, here: str, acme, receiver) -> None:
    page.fill("#webhook-url", receiver.url)
    page.check("#webhook-register input[value='client.banned']")
    page.fill("#webhook-description", "ops")
    page.click("#webhook-register button[type=submit]")
    page.wait_for_url(f"{here}webhooks")
    secret = page.inner_text("#webhooks #secret")
    endpoint = Endpoint.objects.get(subscription=acme)
    assert (endpoint.url, endpoint.events, decrypt(endpoint.secret_encrypted)) == (receiver.url, ["client.banned"],
                                                                                   secret)  # fmt: skip
    page.goto(here)
    page.click(f"[data-endpoint='{endpoint.pk}'] button.test")
    page.wait_for_url(f"{here}#webhooks")
    assert "Test event queued for" in page.inner_text(".messages")
    assert page.inner_text(f"[data-endpoint='{endpoint.pk}'] .deliveries .status") == "pending (queued)"
    assert receiver.requests == []
    assert dispatch_due().sent == 1  # what the notifier's beat runs every few seconds
    page.goto(here)
    assert page.inner_text(f"[data-endpoint='{endpoint.pk}'] .deliveries .status") == "succeeded"
    assert page.inner_text(f"[data-endpoint='{endpoint.pk}'] .deliveries .answer").startswith("200")
    assert len(receiver.requests) == 1
    assert Delivery.objects.get(endpoint=endpoint).response_status == 200


def add_a_contact(page, here: str, acme) -> None:
    page.fill("#contact-email", "billing@acme.test")
    page.check("#contact-add input[value='spend.threshold_reached']")
    page.click("#contact-add button[type=submit]")
    page.wait_for_url(f"{here}#contacts")
    assert page.inner_text("tr[data-contact='billing@acme.test'] .confirmed") == "not yet"
    contact = Contact.objects.get(subscription=acme)
    assert (contact.email, contact.events, contact.confirmed_at) == ("billing@acme.test",
                                                                     ["spend.threshold_reached"], None)  # fmt: skip


def test_a_member_reads_without_forms(page, live_server, acme):
    key, _ = APIKey.issue(acme, name="ci")
    base = live_server.url
    sign_in(page, base, "max")
    page.goto(f"{base}/usage/account/{acme.pk}/")
    assert page.inner_text("#role") == "member"
    assert page.locator("form button[value=set]").count() == 0
    assert page.locator("#id_percents").count() == 0
    assert "2.00 EUR" in page.inner_text("#caps")
    assert page.inner_text(f"tbody[data-key='{key.prefix}'] .state") == "Active"
    assert page.locator("#key-create, #webhook-register, #contact-add, button.revoke, button.roll").count() == 0
