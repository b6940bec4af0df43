"""The page's spend: each budget, cap and key cap with what its period spent, its amount, what is left, its state
and when it resets, read from the ledger (real priced requests, no count kept beside it); keys whose state reads
unambiguously; and the links between this page and the usage page."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.test import Client
from rest_framework.test import APIClient

from plans.models import APIKey, CostBudget, SpendCap
from tests.factories import EndpointLimitFactory
from tests.quotas.test_clock import next_edge

from .test_page import browser, page_url

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]


@pytest.fixture
def priced(team):
    """Acme pays 0.01 a request on /t/priced, 0.10 a day, capped by its owners at 0.05; a CI key of its own
    capped at 0.02 a day."""
    plan = team.subscription.plan
    EndpointLimitFactory(plan=plan, name="priced", scope="priced", rates="1000/min", price=Decimal("0.01"))
    CostBudget.objects.create(plan=plan, period="day", amount=Decimal("0.10"))
    SpendCap.objects.create(subscription=team.subscription, period="day", amount=Decimal("0.05"))
    ci, raw = APIKey.issue(team.subscription, name="ci")
    ci.cap_period, ci.cap_amount = "day", Decimal("0.02")
    ci.save()
    return team, ci, raw


def spend(raw: str, times: int) -> list[int]:
    return [APIClient().get("/t/priced", HTTP_X_API_KEY=raw).status_code for _ in range(times)]


def spend_row(page: str, row_id: str) -> dict[str, str]:
    """The cells of the spend table's row ``row_id`` (by class), tags stripped."""
    row = re.search(rf'<tr data-spend="{re.escape(row_id)}"[^>]*>(.*?)</tr>', page, re.S)
    assert row, f"no spend row {row_id}"
    cells = re.findall(r'<td data-label="[^"]*"(?: class="(\w+)")?>(.*?)</td>', row.group(1), re.S)
    return {name or "label": html.unescape(re.sub(r"<[^>]+>", "", text)).strip() for name, text in cells}


def test_every_budget_cap_and_key_cap_says_what_it_spent_and_when_it_resets(priced, quota_clock):
    team, ci, raw = priced
    assert spend(team.key, 2) == [200, 200]
    assert spend(raw, 3) == [200, 200, 429]  # the key's own cap: 0.02
    midnight = datetime.fromtimestamp(next_edge(86_400, quota_clock.now()), UTC)
    resets = f"{midnight:%Y-%m-%d %H:%M} UTC"  # the page's zone (TIME_ZONE, UTC) until the browser's script
    for user in (team.owner, team.member):
        page = browser(user).get(page_url(team)).content.decode()
        assert spend_row(page, "day-budget") == {"label": "Plan's day budget", "spent": "0.04 USD",
            "amount": "0.10 USD", "remaining": "0.06 USD", "state": "ok", "resets": resets}  # fmt: skip
        assert spend_row(page, "day-cap") == {"label": "Your day cap", "spent": "0.04 USD", "amount": "0.05 USD",
            "remaining": "0.01 USD", "state": "near", "resets": resets}  # fmt: skip
        assert spend_row(page, f"key-{ci.prefix}-day-cap") == {"label": f"Key ci ({ci.prefix}…): its day cap",
            "spent": "0.02 USD", "amount": "0.02 USD", "remaining": "0.00 USD", "state": "reached",
            "resets": resets}  # fmt: skip
        assert f'<time datetime="{midnight.isoformat()}" data-local>' in page
    assert spend(team.key, 2) == [200, 429]  # the cap, at 0.05, refuses: the page said 0.01 was left
    page = browser(team.owner).get(page_url(team)).content.decode()
    assert spend_row(page, "day-cap")["state"] == "reached"
    assert spend_row(page, "day-budget")["remaining"] == "0.05 USD"


def test_a_rolled_then_revoked_key_reads_revoked_not_until_its_expiry(team):
    client = browser(team.owner)
    key = APIKey.objects.get(subscription=team.subscription)
    client.post(page_url(team, f"keys/{key.pk}/roll"), {"overlap_seconds": "3600"})
    key.refresh_from_db()
    assert f"Rolled: works until {key.expires_at:%Y-%m-%d %H:%M} UTC" in state_of(client, team, key)
    client.post(page_url(team, f"keys/{key.pk}/revoke"), {"confirmed": "yes"})
    key.refresh_from_db()
    assert state_of(client, team, key) == f"Revoked {key.revoked_at:%Y-%m-%d %H:%M} UTC"


def state_of(client: Client, team, key: APIKey) -> str:
    page = client.get(page_url(team)).content.decode()
    body = re.search(rf'data-key="{key.prefix}">(.*?)</tbody>', page, re.S)
    assert body
    state = re.search(r'class="state key-\w+">(.*?)</td>', body.group(1), re.S)
    assert state
    return state.group(1).strip()


def test_the_account_page_and_the_usage_page_link_to_each_other(team):
    account = browser(team.owner).get(page_url(team)).content.decode()
    assert '<a href="/usage/" id="to-usage">' in account
    usage = Client()
    assert usage.post("/usage/", {"api_key": team.key}).status_code == 302
    assert '<a href="/usage/account/" id="to-account">' in usage.get("/usage/me/").content.decode()
