"""The dashboard in a real browser: headless Chromium (Debian's) driven by Playwright against pytest-django's
live server, with usage made by real throttled HTTP requests. Each test saves screenshots in test-artifacts/."""

from __future__ import annotations

import json
import os
import time
import urllib.request
from datetime import timedelta

import pytest
from django.test import Client as DjangoClient
from django.utils import timezone

from adaptive.models import AdaptiveSnapshot
from demo.seed import demo_key
from plans.models import Plan, Subscription
from quotas.engine import default_engine
from tests.factories import UserFactory
from usage.flush import flush_usage

from .browser import ARTIFACTS, BASE_DIR, burst, chart_refused, chart_sum, choose_range, get, log_in
from .conftest import subscription_of

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
#: The refusal kinds counted in Denied: a headline card each, a column each on a client's page.
KINDS = ("rate", "budget", "acl", "capacity", "banned")


def test_staff_dashboard_draws_real_usage_updates_live_and_links_to_a_client(page, live_server, live_demo):
    """Throttled HTTP traffic shows in the charts (the last hour per minute, 7 days per hour, 30 days per day);
    the denial rate is drawn with its alert line; new traffic appears without a reload; a top client opens."""
    base = live_server.url
    assert burst(base, demo_key("free"), 15) == {200: 10, 429: 5}
    flush_usage()
    free = record_adaptation()
    log_in(page, base, "ops")
    page.wait_for_selector("body[data-ready='1']")
    assert chart_sum(page, "chart-traffic", "allowed") == 10  # the default range: 24 hours, per hour
    assert chart_refused(page, "chart-traffic") == 5
    check_the_cards_add_up(page, denied=5)
    page.evaluate("window.sameDocument = true")
    choose_range(page, "1h", 60)
    assert page.evaluate("window.sameDocument === true")  # no reload
    assert "range=1h" in page.url  # the query string follows the form, so a reload keeps the range
    check_the_last_hour(page)
    page.screenshot(path=ARTIFACTS / "dashboard-history.png", full_page=True)
    if os.environ.get("UPDATE_DOCS_SCREENSHOT") == "1":  # the pictures in docs/; a normal run leaves them alone
        page.screenshot(path=BASE_DIR / "docs" / "dashboard-history.png", full_page=True)
    check_longer_ranges_and_the_alert_threshold(page)
    choose_range(page, "1h", 60)
    assert page.evaluate("Chart.getChart('chart-adaptive').data.datasets.length") == 3
    assert page.inner_text("#top-clients tbody tr:first-child").startswith(free.name)
    assert "Pro" in page.inner_text("#upgrades")
    spend_most_of_the_day_budget(base)  # read live from the ledger by the next poll: no alert row is involved
    page.wait_for_selector("#budgets td:text('day-budget')")
    assert "0.41 USD\t0.50 USD\t82 %" in page.inner_text("#budgets")
    assert page.evaluate("Chart.getChart('chart-adaptive').data.labels.length") == 3
    check_live_traffic_appears(page, base)
    check_phone_width(page)
    page.set_viewport_size({"width": 1280, "height": 900})
    check_a_top_client_opens(page, base, free.pk)


def record_adaptation() -> Subscription:
    """Three controller snapshots in the last half hour; returns the free demo subscription."""
    plans = {p.slug: str(p.pk) for p in Plan.objects.all()}
    now = timezone.now()
    for minutes, level, cpu in ((30, 1.0, 0.3), (20, 0.6, 0.92), (10, 0.85, 0.8)):  # what the controller records
        AdaptiveSnapshot.objects.create(
            created_at=now - timedelta(minutes=minutes),
            level=level,
            signals={"cpu": cpu, "db": 0.2, "latency": 0.4},
            multipliers={plans["free"]: level * 0.8, plans["pro"]: level, plans["enterprise"]: 1.0},
            reason=f"cpu {cpu:.2f}",
        )
    return subscription_of(demo_key("free"))


def spend_most_of_the_day_budget(base: str) -> None:
    """Two generations of 0.2041 by the free customer: 82 % of its 0.50 day budget."""
    for _ in range(2):
        request = urllib.request.Request(
            base + "/api/demo/generate", data=json.dumps({"prompt": "x" * 4000}).encode(),
            headers={"X-API-Key": demo_key("free"), "Content-Type": "application/json"},
        )  # fmt: skip
        with urllib.request.urlopen(request, timeout=5) as response:
            assert response.status == 200
    default_engine.runtime().tick()  # the key's use reaches Redis, as the engine's poller does every second


def check_the_cards_add_up(page, denied: int) -> None:
    """The Denied card is the sum of one card per refusal kind."""
    cards = {k: int(page.inner_text(f"#total-{k}")) for k in ("denied", *KINDS)}
    assert cards["denied"] == denied == sum(cards[k] for k in KINDS), cards


def check_the_last_hour(page) -> None:
    """The last hour per minute: the traffic, labels in the viewer's time, and the denial rates with the free
    plan's point marked past the alert threshold."""
    assert chart_sum(page, "chart-traffic", "allowed") == 10
    assert chart_refused(page, "chart-traffic") == 5
    assert chart_sum(page, "chart-traffic", "denied: rate") >= 1  # the first refusal asks Redis
    assert page.inner_text("#traffic-title") == "Requests per minute, last hour"
    # Labels are the viewer's times (Asia/Tokyo is UTC+9): the last one is this minute there.
    tokyo = page.evaluate(
        """() => [0, 60000].map(back => new Intl.DateTimeFormat(undefined, {hour: "2-digit", minute: "2-digit",
                   timeZone: "Asia/Tokyo"}).format(new Date(Date.now() - back)))"""
    )  # this minute, or the last if the minute turned since the feed
    assert page.evaluate("Chart.getChart('chart-traffic').data.labels.at(-1)") in tokyo
    rates = page.evaluate(
        """() => Object.fromEntries(Chart.getChart('chart-rates').data.datasets.map(d => [d.label, d]))"""
    )
    assert set(rates["alert threshold"]["data"]) == {0.1}  # the threshold line, from QUOTAS['DENIAL_RATE_ALERT']
    free_line = rates["plan: Free"]
    marked = [c for r, c in zip(free_line["data"], free_line["pointBackgroundColor"], strict=True) if r]
    assert marked
    assert set(marked) == {"#c62828"}  # a third of the free plan's searches refused: its point is red
    assert "plan: Free" in page.inner_text("#rate-alerts")
    assert "scope: search" in page.inner_text("#rate-alerts")


def check_longer_ranges_and_the_alert_threshold(page) -> None:
    """7 days per hour and 30 days per day show the same traffic; the alert threshold follows its field."""
    choose_range(page, "7d", 168)
    assert chart_sum(page, "chart-traffic", "allowed") == 10
    choose_range(page, "30d", 30)  # the daily rows (the database, with Redis's live counters laid over)
    assert chart_sum(page, "chart-traffic", "allowed") == 10
    assert chart_sum(page, "chart-traffic", "denied: rate") == 5  # the daily rows count local refusals as rate
    assert page.evaluate("Chart.getChart('chart-rates').data.datasets.at(-1).label") == "alert threshold"
    page.fill("#alert", "0.5")
    page.dispatch_event("#alert", "change")
    page.wait_for_function("Chart.getChart('chart-rates').data.datasets.at(-1).data[0] === 0.5")
    assert "Nothing yet." in page.inner_text("#rate-alerts")  # 5 of 15 is under 50 %
    page.fill("#alert", "")  # back to the setting's threshold
    page.dispatch_event("#alert", "change")
    page.wait_for_function("Chart.getChart('chart-rates').data.datasets.at(-1).data[0] === 0.1")


def check_live_traffic_appears(page, base: str) -> None:
    """More traffic, no flush to the database, no reload: the next poll shows it, timed in the viewer's zone."""
    burst(base, demo_key("pro"), 7)
    # 10 searches and 2 generations by the free customer before, 7 more now
    page.wait_for_function("document.getElementById('total-allowed').textContent === '19'")
    updated = page.locator("#updated")
    assert "GMT+9" in updated.inner_text(), updated.inner_text()  # the viewer's zone
    assert updated.get_attribute("title").endswith(" UTC")  # UTC on hover
    page.wait_for_function("Chart.getChart('chart-live').data.datasets[0].data.some(v => v > 0)", timeout=20_000)


def check_phone_width(page) -> None:
    """Phone width: one column, nothing wider than the screen."""
    page.set_viewport_size({"width": 390, "height": 844})
    page.wait_for_timeout(300)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.screenshot(path=ARTIFACTS / "dashboard-phone.png", full_page=True)
    if os.environ.get("UPDATE_DOCS_SCREENSHOT") == "1":
        page.screenshot(path=BASE_DIR / "docs" / "dashboard-phone.png", full_page=True)


def check_a_top_client_opens(page, base: str, subscription_id: int) -> None:
    """The top client's link opens its page at its refusals, values read at a glance."""
    page.click("#top-clients a.client-link")
    page.wait_for_url(f"{base}/dashboard/clients/s.{subscription_id}/#refusals")
    assert page.inner_text("#client-plan") == "Free"
    assert page.inner_text("td.remaining[data-limit='search']") == "0"
    # Values read at a glance: "in 23 h 59 min", not raw seconds.
    resets = page.locator("table.limits tbody tr td:last-child").all_inner_texts()
    assert resets
    assert all(t == "now" or t.startswith("in ") for t in resets), resets
    check_recent_usage_by_reason(page, denied=5)
    page.screenshot(path=ARTIFACTS / "client-detail.png", full_page=True)


def check_recent_usage_by_reason(page, denied: int) -> None:
    """Recent usage: a day with refusals shows a count in every reason's column (none blank), adding up to its
    Denied; here today's ``denied``, all refused by rate."""
    head = page.locator("#recent-usage thead th").all_inner_texts()
    cells = page.evaluate(
        "() => [...document.querySelectorAll('#recent-usage tbody tr')].map(tr => [...tr.cells].map(c => c.innerText))"
    )
    rows = [dict(zip(head, (c.strip() for c in row), strict=True)) for row in cells]
    refused = [row for row in rows if row.get("Denied") != "0"]
    assert refused, rows
    for row in refused:
        counts = [row.get(kind.capitalize() if kind != "acl" else "ACL", "") for kind in KINDS]
        assert all(c.isdigit() for c in [*counts, row["Shadow"]]), row  # a blank column fails here
        assert sum(map(int, counts)) == int(row["Denied"]), row
    assert [(row["Denied"], row["Rate"]) for row in refused] == [(str(denied), str(denied))]


def test_a_limit_edited_in_the_admin_applies_to_the_next_request(page, live_server, live_demo):
    """Lowering the free plan's search limit in the admin changes X-RateLimit-Limit on the next request."""
    base = live_server.url
    status, headers = get(f"{base}/api/demo/search?q=x", demo_key("free"))
    assert (status, headers["X-RateLimit-Limit"]) == (200, "10")
    log_in(page, base, "ops")
    free = Plan.objects.get(slug="free")
    page.goto(f"{base}/admin/quota_plans/plan/{free.pk}/change/")
    prefix = page.evaluate(
        """() => [...document.querySelectorAll("input[name^='limits-'][name$='-name']")]
               .find(i => i.value === 'search').name.replace(/-name$/, '')"""
    )
    page.fill(f"input[name='{prefix}-rates']", "3/min")
    page.click("input[name='_continue']")
    page.wait_for_selector(".messagelist .success")
    page.screenshot(path=ARTIFACTS / "admin-plan-saved.png", full_page=True)
    deadline = time.monotonic() + 5
    while True:  # the rules snapshot is reloaded on commit, or by the version poll within about a second
        status, headers = get(f"{base}/api/demo/search?q=x", demo_key("free"))
        if headers["X-RateLimit-Limit"] == "3" or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert (status, headers["X-RateLimit-Limit"]) == (200, "3")


def test_non_staff_are_refused_the_dashboard(page, live_server, transactional_db):
    """Anonymous visitors and signed-in non-staff users land on the admin login instead."""
    base = live_server.url
    page.goto(f"{base}/dashboard/")
    assert page.url.startswith(f"{base}/admin/login/")
    client = DjangoClient()
    client.force_login(UserFactory(username="customer"))
    page.context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": base}])
    page.goto(f"{base}/dashboard/")
    assert page.url.startswith(f"{base}/admin/login/")
    assert "not authorized" in page.inner_text("body")
    assert page.query_selector("#chart-traffic") is None
    page.screenshot(path=ARTIFACTS / "dashboard-refused.png", full_page=True)
