"""Money that is never lost: budget spend Redis did not see when it was spent is charged to it once it answers.

An actual cost whose settlement met a Redis outage, and what the local failure mode admitted during one, wait in
the process (quotas/store/money/owed.py) until the poller's next visit finds Redis up. The test's redis-server is
stopped for real, its data saved first and loaded when it starts again, as a production Redis keeps it.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.test import RequestFactory
from rest_framework.test import APIClient

from plans.models import CostBudget
from quotas import metrics
from quotas.decide import Facts, check, settle
from quotas.engine import default_engine
from quotas.formats.money import to_micros
from quotas.store.usage_batches import spool_dir
from tests import urls
from tests.factories import EndpointLimitFactory, PlanFactory, issue_key
from tests.lost_replies import ReplyLosingProxy
from tests.store_client import client_of
from tests.usage_counters import usage_totals

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]


@pytest.fixture(autouse=True)
def visits_are_the_tests(set_quotas):
    """The poller's visits are the tests' own (``runtime.tick()``): the runtime's poller thread is held off.

    It visits every RULES_CHECK_INTERVAL (1 s of real time), so on a loaded machine it came in the middle of a
    test: it charged the owed spend before the test's visit (which then found nothing to send: no 80 % alert where
    the test waits for it), and it recorded that alert's row on its own database connection, committed outside
    the test's transaction, where later tests of the worker found it (tests/usage/test_retention.py counted two
    alerts for its one). Measured with two busy loops on the 2 cores: 2 and 4 failures in two runs of this module
    and test_retention.py before, none after."""
    set_quotas(RULES_CHECK_INTERVAL=3600)


@pytest.fixture
def outage(redis_server, redis_client):
    """Stop the test's redis-server (``begin``), start it again with the data it had (``end``; always at the end
    of the test)."""
    saved = redis_server.data_dir / "dump.rdb"

    class Outage:
        def begin(self):
            redis_client.save()
            redis_server.stop()

        def end(self):
            if redis_server.process is None:
                redis_server.start()
                saved.unlink()  # loaded: no later restart may bring it back

    outage = Outage()
    yield outage
    outage.end()


@pytest.fixture
def metered(db):
    """A plan priced 0.01 a request on /t/priced, with a 1.00 day budget."""
    plan = PlanFactory(slug="metered", is_default=True)
    EndpointLimitFactory(plan=plan, name="priced", scope="priced", rates="1000/min", price=Decimal("0.01"))
    CostBudget.objects.create(plan=plan, period="day", amount=Decimal("1.00"))
    return plan


def spent(client: APIClient, key: str) -> Decimal:
    """What the client's day budget has spent, as /api/v1/usage/current shows it (read from Redis)."""
    body = client.get("/api/v1/usage/current", HTTP_X_API_KEY=key).json()
    return Decimal(body["budgets"][0]["spent"])


def test_a_redis_error_at_settlement_keeps_the_actual_cost(metered, outage, monkeypatch, alerts):
    """Two requests estimated at the price (0.01) cost 0.30 each, and Redis is away each time the view answers:
    once it is back and the poller visits, usage and the budget hold 0.60 (not the estimates' 0.02), and the 80 %
    alert is not sent for spend that did not reach it."""
    client, key = APIClient(), issue_key(plan=metered)
    monkeypatch.setattr(urls, "DURING_VIEW", [outage.begin])
    for _ in range(2):
        assert client.get("/t/priced?actual=0.30&during=1", HTTP_X_API_KEY=key).status_code == 200
        outage.end()
    default_engine.runtime().tick()  # what the poller thread does every second
    assert usage_totals(client_of(default_engine.runtime()))["c"] == to_micros(Decimal("0.60"))
    assert spent(client, key) == Decimal("0.60")
    assert alerts == []


# The defaults, and a client busy from its second request however fast the machine sends (an allowance is
# then always held when the cost above its estimate ends it: charged before it gave its unused 0.11 back, the
# visit read 1.02 and sent the 100 % alert too).
@pytest.mark.parametrize("allowances", [{}, {"MIN_RATE": 1, "HORIZON": 1.0}], ids=["defaults", "busy"])
def test_the_service_keeps_a_cost_whose_settlement_failed(metered, outage, alerts, set_quotas, allowances):
    """Through the service as a front door calls it: check, Redis stops, settle with 0.45 twice; after the
    poller's visit the budget holds 0.91, and the 80 % alert is sent once, by the visit that reached it."""
    set_quotas("ALLOWANCES", **allowances)
    runtime = default_engine.runtime()
    client, key = APIClient(), issue_key(plan=metered)
    assert client.get("/t/priced", HTTP_X_API_KEY=key).status_code == 200  # 0.01 spent, rules loaded
    for _ in range(2):
        verdict = check(default_engine, Facts(RequestFactory().get("/t/priced", HTTP_X_API_KEY=key), scope="priced"))
        assert verdict.refusal is None
        outage.begin()
        settle(verdict, 200, to_micros(Decimal("0.45")))
        outage.end()
    assert alerts == []
    runtime.tick()
    assert spent(client, key) == Decimal("0.91")  # the first request's 0.01, then two actual costs of 0.45
    assert alerts == [(80, to_micros(Decimal("0.91")))]


def test_spend_admitted_locally_is_charged_to_redis_when_it_returns(metered, outage, set_quotas, alerts):
    """LOCAL_SHARE 1, 0.60 spent through Redis: during the outage this process admits what remained, 0.40 (four
    requests of 0.10), from its memory of the budget. Once Redis is back the poller charges those 0.40: the day's
    budget holds 1.00 spent and the next request is refused, instead of the day spending 1.40 or more. The 100 %
    alert is sent once, by the charge that reached it."""
    set_quotas(LOCAL_SHARE=1.0)
    client, key = APIClient(), issue_key(plan=metered)
    for _ in range(2):
        assert client.get("/t/priced?est=0.30", HTTP_X_API_KEY=key).status_code == 200
    outage.begin()
    codes = [client.get("/t/priced?est=0.10", HTTP_X_API_KEY=key).status_code for _ in range(6)]
    assert codes == [200] * 4 + [429] * 2
    outage.end()
    runtime = default_engine.runtime()
    runtime.tick()
    assert not runtime.guard.breaker.is_open
    assert spent(client, key) == Decimal("1.00")
    assert client.get("/t/priced?est=0.10", HTTP_X_API_KEY=key).status_code == 429
    assert usage_totals(client_of(runtime))["c"] == to_micros(
        Decimal("1.00")
    )  # the outage's cost counted once in usage
    assert [threshold for threshold, _ in alerts] == [80, 100]  # 80 % through Redis (0.60 is not), 100 % after


def test_a_charge_that_fails_is_kept_for_the_next_visit(metered, outage, set_quotas):
    """Redis away at the poller's visit: what is owed stays in the process and is charged at the next visit."""
    set_quotas(LOCAL_SHARE=1.0)
    client, key = APIClient(), issue_key(plan=metered)
    assert client.get("/t/priced?est=0.10", HTTP_X_API_KEY=key).status_code == 200
    outage.begin()
    assert client.get("/t/priced?est=0.20&actual=0.25", HTTP_X_API_KEY=key).status_code == 200
    runtime = default_engine.runtime()
    runtime.tick()
    runtime.charge_owed()  # as if the probe had said yes just before Redis failed again
    assert runtime.guard.owed.total == to_micros(Decimal("0.25"))
    outage.end()
    runtime.tick()
    assert runtime.guard.owed.total == 0
    assert spent(client, key) == Decimal("0.35")


def test_a_full_ledger_drops_the_oldest_and_counts_it(metered, outage, set_quotas):
    """The ledger holds LOCAL_DENY_CACHE_SIZE clients' periods: past that, the oldest is dropped and counted."""
    set_quotas(LOCAL_SHARE=1.0, LOCAL_DENY_CACHE_SIZE=1)
    first, second = issue_key(plan=metered), issue_key(plan=metered)
    client = APIClient()
    for key in (first, second):
        assert client.get("/t/priced", HTTP_X_API_KEY=key).status_code == 200
    before = metrics.REGISTRY.get_sample_value("quota_owed_spend_dropped_micros_total") or 0
    outage.begin()
    for key in (first, second):
        assert client.get("/t/priced?est=0.10", HTTP_X_API_KEY=key).status_code == 200
    assert metrics.REGISTRY.get_sample_value("quota_owed_spend_dropped_micros_total") == before + 100_000
    outage.end()
    default_engine.runtime().tick()
    assert (spent(client, first), spent(client, second)) == (Decimal("0.01"), Decimal("0.11"))


@pytest.fixture
def lost_replies(redis_server, fresh_redis, set_quotas):
    """The engine talks to the test's redis-server through a proxy that can lose a reply (tests/lost_replies.py)."""
    proxy = ReplyLosingProxy(upstream=redis_server.port).start()
    set_quotas(REDIS_URL=proxy.url)
    yield proxy
    proxy.stop()


def test_a_settlement_whose_reply_is_lost_is_charged_once(metered, lost_replies, alerts):
    """Redis runs the settlement of a request estimated at 0.01 that cost 0.30, and its reply is lost: the retry
    the poller sends changes nothing, so the budget and billed usage hold 0.30 (they held 0.59 when a retry
    counted the difference again)."""
    client, key = APIClient(), issue_key(plan=metered)
    lost_replies.arm(b"adjust")
    assert client.get("/t/priced?actual=0.30", HTTP_X_API_KEY=key).status_code == 200
    assert lost_replies.cuts == 1
    runtime = default_engine.runtime()
    runtime.tick()  # what the poller thread does every second: the settlement is sent again
    assert not runtime.guard.owed
    assert spent(client, key) == Decimal("0.30")
    assert usage_totals(client_of(runtime))["c"] == to_micros(Decimal("0.30"))
    assert alerts == []


def test_spend_owed_when_a_process_exits_is_charged_by_the_next(metered, outage, monkeypatch):
    """A request estimated at the price (0.01) costs 0.50 while Redis is away, and the process exits before Redis
    is back: what it owes goes to a signed spool file, and the next process's poller charges it, so the budget
    and billed usage hold 0.50 (the budget held 0.01: the rest was dropped at exit)."""
    client, key = APIClient(), issue_key(plan=metered)
    monkeypatch.setattr(urls, "DURING_VIEW", [outage.begin])
    assert client.get("/t/priced?actual=0.50&during=1", HTTP_X_API_KEY=key).status_code == 200
    default_engine.reset()  # the process exits, Redis still away
    assert len(list(spool_dir().glob("*.owed"))) == 1
    outage.end()
    runtime = default_engine.runtime()  # the next process
    runtime.tick()
    assert not list(spool_dir().glob("*.owed*"))
    assert spent(client, key) == Decimal("0.50")
    assert usage_totals(client_of(runtime))["c"] == to_micros(Decimal("0.50"))


def test_spend_owed_at_exit_sends_its_alert_when_the_next_process_charges_it(metered, outage, monkeypatch, alerts):
    """As above with an actual cost of 0.85: the 80 % alert is sent when the next process charges the spool, with
    the spend then committed (0.85), since the process that spent it could not tell Redis."""
    client, key = APIClient(), issue_key(plan=metered)
    monkeypatch.setattr(urls, "DURING_VIEW", [outage.begin])
    assert client.get("/t/priced?actual=0.85&during=1", HTTP_X_API_KEY=key).status_code == 200
    default_engine.reset()  # the process exits, Redis still away
    assert alerts == []
    outage.end()
    default_engine.runtime().tick()  # the next process
    assert spent(client, key) == Decimal("0.85")
    assert alerts == [(80, to_micros(Decimal("0.85")))]


def test_the_alert_a_lost_settlement_reply_reached_is_sent_by_its_retry(metered, lost_replies, alerts):
    """The settlement of a request estimated at 0.01 that cost 0.85 reaches the day's 80 %, and its reply is lost:
    Redis stored the level, so only the retry can report it. The retry answers the thresholds the first run
    reached: the 80 % alert is sent once, spent 0.85."""
    client, key = APIClient(), issue_key(plan=metered)
    lost_replies.arm(b"adjust")
    assert client.get("/t/priced?actual=0.85", HTTP_X_API_KEY=key).status_code == 200
    assert lost_replies.cuts == 1
    assert alerts == []
    default_engine.runtime().tick()  # the settlement is sent again
    assert spent(client, key) == Decimal("0.85")
    assert alerts == [(80, to_micros(Decimal("0.85")))]
    default_engine.runtime().tick()
    assert alerts == [(80, to_micros(Decimal("0.85")))]  # once


@pytest.mark.parametrize("fault", ["lost reply", "Redis error"])
def test_the_alert_a_decision_reached_is_sent_once_when_its_settlement_fails(
    metered, lost_replies, alerts, monkeypatch, fault
):
    """0.75 spent; a request estimated at 0.05 reaches the day's 80 % by its decision and costs 0.90 in all, and
    its settlement fails: Redis runs it and the reply is lost, or Redis is away. The decision's 80 % goes with the
    settlement Redis did not confirm, so it is sent once, by the poller's charge, with the spend settled (0.90).
    (With a lost reply it was sent twice: by the failed settlement with the estimate's 0.80, and again by the
    retry, which answers the thresholds the first run reported; the money machine's minimal example.)"""
    client, key = APIClient(), issue_key(plan=metered)
    assert client.get("/t/priced?actual=0.75", HTTP_X_API_KEY=key).status_code == 200
    if fault == "lost reply":
        lost_replies.arm(b"adjust")
    else:
        monkeypatch.setattr(urls, "DURING_VIEW", [lambda: setattr(lost_replies, "down", True)])
    try:
        assert client.get("/t/priced?est=0.05&actual=0.15&during=1", HTTP_X_API_KEY=key).status_code == 200
    finally:
        lost_replies.disarm()
        lost_replies.down = False
    runtime = default_engine.runtime()
    runtime.tick()  # what the poller thread does every second: the settlement is charged (again)
    runtime.tick()
    assert not runtime.guard.owed
    assert spent(client, key) == Decimal("0.90")
    assert usage_totals(client_of(runtime))["c"] == to_micros(Decimal("0.90"))
    assert alerts == [(80, to_micros(Decimal("0.90")))]
