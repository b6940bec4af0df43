"""The customer's page in headless Chromium, spent to its cap by real priced requests: the owner reads what the
day spent, what is left, that the cap is reached and when it resets in their own time zone; follows the link to
the usage page and back; and the page fits at 1280, 1000 and 390 px, with nothing of the key table outside its
card. Run with ``UPDATE_DOCS_SCREENSHOT=1`` it redraws docs/console-page.png."""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from datetime import datetime, time, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone

from notifications.models import Contact, Delivery, Endpoint, Event
from notifications.secrets import encrypt, new_secret
from plans.models import APIKey, CostBudget, SpendCap
from quotas.engine import default_engine
from tests.dashboard.browser import ARTIFACTS, BASE_DIR
from tests.factories import EndpointLimitFactory, PlanFactory, SubscriptionFactory, UserFactory

from .test_browser import sign_in

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.urls("tests.urls")]

#: The viewer's time zone: far from the server's (UTC), so a reset shown in UTC would read wrong.
VIEWER_ZONE = "America/New_York"
WIDTHS = (1280, 1000, 390)


@pytest.fixture
def acme(transactional_db):
    """Acme pays 0.01 a request on /t/priced, 0.05 a day, capped by its owner at 0.03; a key for its app, a CI
    key held to its own rate and cap, a key rolled then revoked; an endpoint with a delivery and a contact."""
    owner = UserFactory(username="olivia")
    subscription = SubscriptionFactory(name="Acme", user=owner, plan=PlanFactory(slug="pro"))
    plan = subscription.plan
    EndpointLimitFactory(plan=plan, name="priced", scope="priced", rates="1000/min", price=Decimal("0.01"))
    CostBudget.objects.create(plan=plan, period="day", amount=Decimal("0.05"))
    SpendCap.objects.create(subscription=subscription, period="day", amount=Decimal("0.03"))
    _, raw = APIKey.issue(subscription, name="production app")
    ci, _ = APIKey.issue(subscription, name="ci", expires_at=timezone.now() + timedelta(days=90))
    ci.own_rates, ci.cap_period, ci.cap_amount = "10/min; 1000/day", "day", Decimal("0.02")
    ci.save()
    old, _ = APIKey.issue(subscription, name="contractor")
    old.roll(timedelta(hours=24))
    old.revoked_at = timezone.now()
    old.save(update_fields=["revoked_at"])
    endpoint = Endpoint.objects.create(subscription=subscription, url="https://hooks.acme.example/quota-events",
                                       events=["budget.threshold_crossed"], description="ops",
                                       secret_encrypted=encrypt(new_secret()))  # fmt: skip
    event = Event.objects.create(type="budget.threshold_crossed", subscription=subscription, dedupe_key="t:1",
                                 data={}, created_at=timezone.now())  # fmt: skip
    Delivery.objects.create(event=event, endpoint=endpoint, body="{}", status=Delivery.Status.SUCCEEDED, attempts=1,
                            response_status=200, response_body="ok", last_attempt_at=timezone.now())  # fmt: skip
    Contact.objects.create(subscription=subscription, email="billing@acme.example", confirmed_at=timezone.now())
    return subscription, raw, old


@pytest.fixture
def page(chromium):
    """JavaScript on (the page's script writes moments in the viewer's zone), in New York."""
    ARTIFACTS.mkdir(exist_ok=True)
    context = chromium.new_context(viewport={"width": 1280, "height": 900}, timezone_id=VIEWER_ZONE, locale="en-US")
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()


def spend_to_the_cap(base: str, raw: str) -> list[int]:
    """Priced requests until the cap refuses one: real HTTP through the live server."""
    codes = []
    for _ in range(4):
        request = urllib.request.Request(f"{base}/t/priced", headers={"X-API-Key": raw})
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                codes.append(response.status)
        except urllib.error.HTTPError as exc:
            codes.append(exc.code)
    default_engine.runtime().tick()  # the key's use reaches Redis, as the engine's poller does every second
    return codes


def test_an_owner_reads_the_spend_to_the_cap_follows_the_links_and_the_page_fits(page, live_server, acme):
    subscription, raw, revoked = acme
    base, here = live_server.url, f"{live_server.url}/usage/account/{subscription.pk}/"
    assert spend_to_the_cap(base, raw) == [200, 200, 200, 429]
    sign_in(page, base, "olivia")
    page.goto(here)

    cap = "#spend tr[data-spend='day-cap']"
    assert page.inner_text(f"{cap} .spent") == "0.03 USD"
    assert page.inner_text(f"{cap} .amount") == "0.03 USD"
    assert page.inner_text(f"{cap} .remaining") == "0.00 USD"
    assert page.inner_text(f"{cap} .state") == "reached"
    assert page.inner_text("#spend tr[data-spend='day-budget'] .remaining") == "0.02 USD"
    resets = datetime.fromisoformat(page.get_attribute(f"{cap} time", "datetime"))
    assert (resets.utcoffset(), resets.time()) == (timedelta(0), time(0))  # the day ends at midnight, UTC
    local = resets.astimezone(ZoneInfo(VIEWER_ZONE))
    assert page.inner_text(f"{cap} .resets") == f"{local:%Y-%m-%d %H:%M} {local.tzname()}"  # e.g. 19:00 EST
    state = page.inner_text(f"#keys tbody[data-key='{revoked.prefix}'] .state")
    assert state.startswith("Revoked ")
    assert "until" not in state
    assert "xpires" not in state

    page.click("#to-usage")
    page.wait_for_url(f"{base}/usage/")
    page.fill("#id_api_key", raw)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/usage/me/")
    page.click("#to-account")
    page.wait_for_url(f"{base}/usage/account/")
    page.click("text=Acme")
    page.wait_for_url(here)

    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.evaluate("document.querySelectorAll('#keys details').forEach(d => d.open = true)")  # every control
        assert page.evaluate("document.documentElement.scrollWidth") <= width, width
        assert outside_their_card(page, "#keys") == [], width
        assert outside_their_card(page, "#spend") == [], width
        page.screenshot(path=ARTIFACTS / f"console-page-{width}.png", full_page=True)
        for card in ("spend", "keys"):
            page.locator(f"#{card}").screenshot(path=ARTIFACTS / f"console-{card}-{width}.png")
        page.evaluate("document.querySelectorAll('#keys details').forEach(d => d.open = false)")
    if os.environ.get("UPDATE_DOCS_SCREENSHOT") == "1":  # the picture in docs/; a normal run leaves it alone
        page.set_viewport_size({"width": 1000, "height": 900})
        page.goto(here)
        page.screenshot(path=BASE_DIR / "docs" / "console-page.png", full_page=True)


def outside_their_card(page, card: str) -> list[str]:
    """Every element of ``card``'s table drawn outside the card (or the table scrolling inside it): []."""
    return page.evaluate(
        """(card) => {
            const box = document.querySelector(card).getBoundingClientRect();
            const found = [];
            for (const el of document.querySelectorAll(`${card} table, ${card} table *`)) {
                const r = el.getBoundingClientRect();
                if (r.width && (r.right > box.right + 0.5 || r.left < box.left - 0.5)) {
                    found.push(`${el.tagName}.${el.className} ${Math.round(r.left)}-${Math.round(r.right)}`);
                }
            }
            const table = document.querySelector(`${card} table`);
            if (table && table.scrollWidth > table.clientWidth) found.push("the table scrolls");
            return found;
        }""",
        card,
    )
