"""The client usage page's ranges (1 h and 24 h from the subscriber's history, 7 and 30 days from its daily
rows), the fallback when Redis is down, and the upgrade prompt's figures for the demo's free customer."""

from __future__ import annotations

import json
import re

import pytest

from demo.seed import demo_key
from quotas.engine import default_engine


def chart_of(text: str) -> dict:
    return json.loads(re.search(r'<script id="usage-data" type="application/json">(.*?)</script>', text, re.S)[1])


@pytest.fixture
def link(client, traffic) -> str:
    """The free customer's signed page, after the engine wrote its history (as its poller does each second)."""
    default_engine.runtime().tick()
    return client.post("/usage/", {"api_key": demo_key("free")})["Location"]


@pytest.mark.parametrize(
    ("asked", "shown", "points", "title"),
    [
        ("1h", "1h", 60, "Requests per minute (last hour)"),
        ("24h", "24h", 24, "Requests per hour (last 24 hours)"),
        ("7d", "7d", 7, "Requests per day (last 7 days)"),
        ("30d", "30d", 30, "Requests per day (last 30 days)"),
        ("", "30d", 30, "Requests per day (last 30 days)"),
        ("1y", "30d", 30, "Requests per day (last 30 days)"),
        ("%00<script>", "30d", 30, "Requests per day (last 30 days)"),
    ],
)
def test_each_range_shows_the_free_customers_15_requests(client, link, asked, shown, points, title):
    """Every range holds today's 10 admitted and 5 refused searches in its latest point; an unknown range is the
    30-day default, never an error; the title names the range."""
    response = client.get(link, {"range": asked})
    assert response.status_code == 200
    text = response.content.decode()
    chart = chart_of(text)
    assert (chart["shown"], len(chart["labels"]), chart["title"]) == (shown, points, title)
    assert f'<h2 id="chart-title">{title}</h2>' in text
    assert (sum(chart["allowed"]), sum(chart["denied"])) == (10, 5)
    assert (chart["allowed"][-1], chart["denied"][-1]) == (10, 5) or shown == "1h"  # 1 h: the minute sent in
    assert f'data-range="{shown}" aria-current="page"' in text
    assert chart["notice"] is None


def test_minute_and_hour_labels_are_utc_times_for_the_browser_to_localise(client, link):
    chart = chart_of(client.get(link, {"range": "1h"}).content.decode())
    assert chart["resolution"] == "minute"
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:00Z", label) for label in chart["labels"])
    assert "Intl.DateTimeFormat" in client.get(link).content.decode()


@pytest.mark.parametrize("asked", ["1h", "24h"])
def test_without_redis_the_recent_ranges_show_a_notice_and_the_days(client, link, redis_server, asked):
    """Redis down: 200, the notice, and the daily chart from the database rows (flushed by the fixture)."""
    redis_server.stop()
    try:
        response = client.get(link, {"range": asked})
    finally:
        redis_server.start()
    text = response.content.decode()
    assert response.status_code == 200
    chart = chart_of(text)
    assert (chart["shown"], chart["resolution"], len(chart["labels"])) == ("30d", "day", 30)
    assert 'id="range-notice"' in text
    assert "Redis cannot be reached" in text
    assert (chart["allowed"][-1], chart["denied"][-1]) == (10, 5)


def test_the_upgrade_prompt_says_what_pro_would_have_allowed(client, link):
    """Free refused 5 of 15 searches by its 10/min search limit; Pro's limits on every request allow 50,000 a day
    against Free's 1,000 (50 times), so up to all 5 would have been allowed."""
    text = client.get(link).content.decode()
    prompt = re.sub(r"\s+", " ", re.search(r'<p class="prompt" id="upgrade-figures">(.*?)</p>', text, re.S)[1])
    assert 'In the last 7 days <strong id="refused-rate">5</strong> of your requests were refused' in prompt
    assert '<strong id="refused-budget">0</strong> by your budget' in prompt
    assert "on <strong>Pro</strong>, whose limits are 50 times higher" in prompt
    assert 'up to <strong id="would-allow">5</strong> of them would have been allowed' in prompt


def test_no_figures_without_refusals(client, traffic):
    """The pro customer was never refused: no figures (and no offer from the top of its limits)."""
    default_engine.runtime().tick()
    link = client.post("/usage/", {"api_key": demo_key("pro")})["Location"]
    assert 'id="upgrade-figures"' not in client.get(link).content.decode()
