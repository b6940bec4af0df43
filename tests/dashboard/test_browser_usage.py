"""The client usage page in headless Chromium: the 1 h chart has the requests just sent, a range link switches
to 30 days, and at phone width nothing is wider than the screen."""

from __future__ import annotations

import os

import pytest

from demo.seed import demo_key
from usage.flush import flush_usage

from .browser import ARTIFACTS, BASE_DIR, burst, chart_sum

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_client_page_draws_the_last_hour_then_30_days_and_fits_a_phone(page, live_server, live_demo):
    base = live_server.url
    codes = burst(base, demo_key("free"), 14)  # also writes the engine's history, as its poller does
    flush_usage()
    assert (codes[200], codes[429]) == (10, 4)
    page.goto(f"{base}/usage/")
    page.fill("#id_api_key", demo_key("free"))
    page.click("button[type=submit], input[type=submit]")
    page.wait_for_url(f"{base}/usage/*/")
    page.goto(page.url + "?range=1h")
    page.wait_for_function("document.body.dataset.ready === '1'")
    assert page.inner_text("#chart-title") == "Requests per minute (last hour)"
    assert page.evaluate("Chart.getChart('usage-chart').data.labels.length") == 60
    assert (chart_sum(page, "usage-chart", "allowed"), chart_sum(page, "usage-chart", "refused")) == (10, 4)
    # Minute labels in the viewer's time zone (Asia/Tokyo), "HH:MM", not the UTC ISO text.
    assert ":" in page.evaluate("Chart.getChart('usage-chart').data.labels[59]")
    assert "T" not in page.evaluate("Chart.getChart('usage-chart').data.labels[59]")
    assert "would have been allowed" in page.inner_text("#upgrade-figures")
    page.screenshot(path=ARTIFACTS / "usage-1h.png", full_page=True)
    if os.environ.get("UPDATE_DOCS_SCREENSHOT") == "1":  # the pictures in docs/; a normal run leaves them alone
        page.screenshot(path=BASE_DIR / "docs" / "usage-page.png", full_page=True)

    page.click("a[data-range='30d']")
    page.wait_for_url("**/?range=30d")
    page.wait_for_function("document.body.dataset.ready === '1'")
    assert page.inner_text("#chart-title") == "Requests per day (last 30 days)"
    assert page.evaluate("Chart.getChart('usage-chart').data.labels.length") == 30
    assert (chart_sum(page, "usage-chart", "allowed"), chart_sum(page, "usage-chart", "refused")) == (10, 4)

    page.set_viewport_size({"width": 390, "height": 844})
    page.wait_for_timeout(300)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.screenshot(path=ARTIFACTS / "usage-phone.png", full_page=True)
    if os.environ.get("UPDATE_DOCS_SCREENSHOT") == "1":
        page.screenshot(path=BASE_DIR / "docs" / "usage-page-phone.png", full_page=True)
