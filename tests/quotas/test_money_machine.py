"""Money through the real service, step by step, against a reference model (a Hypothesis state machine).

Each example is one customer (a new subscription, its first key) on a plan with a day and a month budget and a
period quota of requests (or, one in four, on the plan "busy"), whose steps are drawn from: priced requests
(/t/priced) whose actual cost is equal to, below or above the estimate, or that fail (5xx); a priced streamed
response (/t/priced-stream) read to its end (charged the cost its body reports at its end, nothing when the body
fails midway) or cut after its first chunk, the client gone and the response closed (charged what the body
reported by then, else its estimate: docs/concepts.md, "Streamed responses"); a priced GraphQL batch
(graphene-django's, /t/graphql-batch: decided once, weighing the sum of its operations' complexities, priced per
unit; over the endpoint's cap, 1 unit and a 400: docs/graphql.md); a burst of requests decided and settled by
another process (an Engine of its own on the same store and clock, with its own allowances and poller: on the
plan "busy" both processes hold allowances for the same limits); requests to a view with a second throttle class
counting per tenant (/t/priced-tenant), the tenant shared with another customer whose requests may spend its
period quota, so that the second class refuses what the first admitted; the customer's caps and a key's own cap
set, changed and removed, and the customer's alert thresholds set, through the console API, and the watcher's
look (its host's clock on the decisions' or 5 s ahead of it); a key rolled (console API, with an overlap or
none), revoked (refused at once, cannot be rolled) and a new key issued; a plan change to a plan with other
budgets, none, or local allowances on ("busy"), and every allowance's end in both processes; BUDGET_TIME_ZONE
moved (UTC, New York, Tokyo); the injected clock moved to just before or after a day's or a month's end; the
poller's visit; a read of the usage API; and on Redis only (through tests/lost_replies.py's proxy): a settlement
whose reply is lost, one that fails with Redis away (and then the process exits before Redis is back: the next
process charges what it spooled), and a Redis outage with requests during it and its recovery. Everything goes
through HTTP (APIClient on tests/quotas/money_urls.py: tests.urls and the machine's views) to the real store, on
Redis and on the memory store. The model (tests/quotas/money_model.py) predicts every decision the store makes;
what an allowance or the local fallback admits it does not predict, and charges as the service admitted it. (The
other process authenticates API keys as every view does, with the process's engine's rules: APIKeyAuthentication
reads ``default_engine``; its decisions, allowances, settlements and poller are its own.) After every step:

(a) each limit in force for each key (budgets, caps, key caps, the period quota) has spent, as the store reports
    it through ``quotas.api.standing``, what the model charged it in its period (with an allowance live: at
    most that, its committed spend); and each request was admitted or refused (by the limits named) as the
    model says, where the model decides;
(b) the billed usage (the usage counters' cost) is the sum of the admitted requests' actual costs (with an
    allowance live: at most that);
(c) a refused request is charged nothing (nor is a failed one, but by a period quota);
(d) each counter holds at most the amount in force at an admission plus that request's cost beyond its estimate
    (docs/concepts.md, "Overspend window"; with allowances live in both processes, each process's excess added),
    or after an outage what it held plus LOCAL_SHARE of its amount plus that excess (the local failure mode's
    bound);
(e) alerts (``quotas.signals.budget_threshold_crossed``) are the model's: each sent at most once per limit,
    amount, period and threshold, only when the committed spend reached it (100 % also on a refusal at 80 % or
    more, as quotas/signals.py documents), with the spend then committed, and none missing; a period quota's in
    its unit without a currency. Once an example used allowances or met an outage, which alerts are sent is not
    predicted: each must still be sent once, have reached its threshold and report no more than the requests
    admitted were charged. Customer thresholds: the ``spend.threshold_reached`` events each request's settlement
    records (those its committed spend crossed, per limit, name, period and percent) and those the watcher's look
    records (thresholds reached that no spend crossed) are the model's; with allowances or after an outage, each
    reached its percent and reports no more than was charged.
(f) each alert of the customer is a ``budget.threshold_crossed`` event of its own (notifications/receivers.py):
    one per client, limit, period and threshold (two keys' caps are two events, each naming its key), with the
    first alert's spend and amount, a money limit's in the plans' currency, a period quota's in its unit.

A check the service is known to fail is named in :data:`KNOWN_FINDINGS` (with the minimal example Hypothesis
printed), which turns that one check off (or to what the service does) until the product is fixed; nothing
else is relaxed.

Profiles: `make test` runs :data:`EXAMPLES` examples of up to :data:`STEPS` steps per store (about a minute for
both on two shared cores), and replays :data:`FINDINGS` and :data:`SCENARIOS`; ``QUOTAS_MONEY_MACHINE=nightly``
runs 3,000 examples of up to 40 steps per store (an hour or more), for the nightly job;
``QUOTAS_MONEY_MACHINE=300x10`` a draw of 300 examples of up to 10 steps per store, seeded by pytest's
``--hypothesis-seed``.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.core.handlers.base import BaseHandler
from django.core.signals import request_finished, setting_changed
from django.db import close_old_connections
from django.db.models.signals import post_delete, post_save
from django.test import RequestFactory
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from rest_framework.test import APIClient

from console.models import Membership, Role
from notifications.events import BUDGET_THRESHOLD, SPEND_THRESHOLD
from notifications.models import Event
from notifications.watch import watch
from plans.models import AlertThresholds, APIKey, CostBudget, PeriodQuota, Subscription
from plans.models.keys import API_KEY_PREFIX
from plans.receivers import WATCHED
from quotas.api import identify, standing
from quotas.engine import Engine, default_engine
from quotas.formats.money import from_micros, to_micros
from quotas.identity.clients import hash_api_key
from quotas.internal_api import rules_changed
from quotas.settings import quota_settings
from quotas.signals import budget_threshold_crossed
from quotas.store.money.budget_day import day_of
from quotas.store.usage_hash_format import usage_key
from quotas.testing import ManualClock
from tests import urls
from tests.factories import EndpointLimitFactory, PlanFactory, UserFactory
from tests.lost_replies import ReplyLosingProxy
from tests.quotas import money_urls
from tests.quotas.money_model import PERIODS, Alert, Key, Money, Plan, first_january, period_end
from tests.store_client import client_of
from usage.flush import flush_usage
from usage.models import UsageRecord

# A failure's shrinking may take minutes more than the run: it should end with its example rather than the
# session's 120 s timeout.
# slow: about a minute of CPU for both stores, more than `make test-fast` has for everything (it runs in `make test`).
pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db,
    pytest.mark.urls("tests.quotas.money_urls"),
    pytest.mark.timeout(900),
]

PROFILE = os.environ.get("QUOTAS_MONEY_MACHINE", "")
NIGHTLY = PROFILE == "nightly"
#: A seeded draw of its own: ``QUOTAS_MONEY_MACHINE=300x10`` runs 300 examples of up to 10 steps per store, drawn
#: anew (with pytest's ``--hypothesis-seed=21``, the same again).
DRAW = tuple(int(n) for n in PROFILE.split("x")) if PROFILE.count("x") == 1 else None
#: Examples per store, and the most steps in one. A step that saves a row costs a rules reload (about 9 ms) and a
#: lookup of each key after it (4 ms each) besides its HTTP call (15 ms); a request about 5 ms. So the customers
#: are made ahead in bulk (one reload, not one per example), the billed usage is read from the usage hashes of
#: the days the example used (a scan of the keyspace grew with every example), a customer has two keys at most,
#: and a step sends up to three requests. Measured on two shared cores with every rule (load 4.7 to 6.6): 150
#: examples of up to 8 steps per store, 49 s of CPU for both, 81 s of wall clock (0.16 s of CPU an example; it
#: was 0.45 s at 12 steps with half the rules). With the Redis fault rules back (2026-11-29, load about 7): the
#: whole module, both stores, 33 s of CPU and 49 s of wall clock. (A seeded draw of 300 examples of 10 steps, seed
#: 21, found a product bug on both stores: FINDINGS' "settlement_in_the_decisions_period".) With streams, GraphQL
#: batches, the other process and key revokes (2026-11-29, load 6 to 7, the old module measured alongside): 31 s of
#: CPU and 56 s of wall clock for the whole module, where the old one took 38 s and 70 s (the new steps cost less
#: than those they displace in 8: a threshold set or a key rolled, a rules reload each).
#: With the tenant's throttle class, the exit with Redis away, the watcher's host ahead and the events check (f)
#: (2026-11-29, load 4 to 10, main's module run alongside, twice): the draw of both stores 43.9 s and 38.2 s of
#: wall clock where main's took 62.9 s and 45.0 s, and 34.9 s of CPU where main's took 41.0 s (its draw differs);
#: on PostgreSQL at load 6.5 to 8.8, 100 s of wall clock where main's took 82 s. The events check reads only after
#: a step that sent an alert (read after every step, it added 18 s on the memory store).
EXAMPLES, STEPS = (3_000, 40) if NIGHTLY else DRAW or (150, 8)

#: Checks the service fails today, each a finding of this machine waiting for the product's fix; a name listed
#: here turns that one check off, or to what the service does today (see the report of each in its comment).
KNOWN_FINDINGS: frozenset[str] = frozenset()

#: The plans an example moves between: (price, {period: budget amount}, local allowances), in micro-units.
PLANS = {
    "budgeted": (10_000, {"day": 100_000, "month": 300_000}, False),  # and QUOTA
    "busy": (10_000, {"day": 100_000, "month": 300_000}, True),
    "day-only": (20_000, {"day": 60_000}, False),
    "unbudgeted": (10_000, {}, False),
}
#: The period quota of the plan "budgeted": (name, period, requests).
QUOTA = ("requests-per-day", "day", 6)
#: A cap's amounts: nothing, below, at and above the budgets.
CAP_AMOUNTS = (0, 10_000, 30_000, 50_000, 60_000, 90_000, 100_000, 150_000, 300_000, 400_000)
ESTIMATES = (None, 5_000, 10_000, 20_000, 40_000)  # None: the plan's price


def check(finding: str) -> bool:
    """Whether the check named ``finding`` runs (it does unless KNOWN_FINDINGS lists it)."""
    return finding not in KNOWN_FINDINGS


def money(micros: int) -> str:
    return f"{from_micros(micros):f}"


@dataclass
class World:
    """What every example shares: the plans (model and rows), the owner signed in, the clock, the alerts sent."""

    plans: dict[str, Plan]
    owner: Any
    owner_api: APIClient
    client: APIClient  # a key's (one for every example: each new client loads the middleware again)
    clock: ManualClock
    alerts: list[dict[str, Any]]
    customers: list[tuple[Subscription, APIKey, str]]  # made ahead, each an example's: see new_customers
    proxy: ReplyLosingProxy | None  # between the engine and Redis (None on the memory store)
    other: Engine  # another process's: /t/priced-elsewhere decides with it (money_urls.ElsewhereThrottle)
    handler: BaseHandler  # Django's request handler, its middleware loaded: for a streamed response cut short
    rules_moved: bool = False  # a row the rules are built from changed since the other process's poller looked
    currency: str = ""  # the plans' (each budget's): every money event's

    def time_zone(self, tz: str) -> None:
        """BUDGET_TIME_ZONE set to ``tz``: in the test's own QUOTAS (set_quotas' copy, which the settings fixture
        drops at the end), and announced as a settings change is (the engine rebuilds its runtime). Not through
        set_quotas: each of its calls stacks one more settings override, and a few hundred reach Python's
        recursion limit on every settings read."""
        django_settings.QUOTAS["BUDGET_TIME_ZONE"] = tz
        quotas = django_settings.QUOTAS
        setting_changed.send(sender=type(django_settings), setting="QUOTAS", value=quotas, enter=True)

    def other_polls(self) -> None:
        """The other process's poller visits (it does every second), having seen the rules version move if a
        row the rules are built from changed: what the commit of that change does for other processes (the
        version bumped by ``rules.invalidate()``, an on_commit callback the test's transaction never runs) is
        done here first. (Not invalidate() itself: this process reloaded at the change already, and a reload
        more on every such step cost more than the new rules' other checks.)"""
        if self.rules_moved:
            default_engine.runtime().rules.version_counter.bump()
            self.rules_moved = False
        self.other.runtime().tick()

    def customer(self) -> tuple[Subscription, APIKey, str]:
        """A new customer on the budgeted plan, its owner's, with its first key (and that key's raw value)."""
        if not self.customers:
            self.customers = new_customers(self.plans["budgeted"].pk, self.owner, POOL)
        return self.customers.pop()


#: How many customers are made at a time: every example takes one.
POOL = EXAMPLES + 50


def new_customers(plan: int, owner: Any, count: int) -> list[tuple[Subscription, APIKey, str]]:
    """``count`` new subscriptions on plan ``plan``, ``owner``'s, each with a key: three bulk inserts and one
    rules reload instead of three saves and a reload for each example (a tenth of a short example's time).
    The key is made as APIKey.issue makes it."""
    subs = Subscription.objects.bulk_create(Subscription(name="Customer", plan_id=plan) for _ in range(count))
    Membership.objects.bulk_create(Membership(subscription=sub, user=owner, role=Role.OWNER) for sub in subs)
    raws = [API_KEY_PREFIX + secrets.token_urlsafe(32) for _ in subs]
    keys = APIKey.objects.bulk_create(
        APIKey(subscription=sub, prefix=raw[:10], key_hash=hash_api_key(raw))
        for sub, raw in zip(subs, raws, strict=True)
    )
    rules_changed()  # bulk_create sends no post_save
    return list(zip(subs, keys, raws, strict=True))


WORLD: list[World] = []  # the running test's, for the machine (Hypothesis builds it with no arguments)


class MoneyMachine(RuleBasedStateMachine):
    """One customer's money, through the service and through the model, step by step."""

    def __init__(self) -> None:
        super().__init__()
        self.world = world = WORLD[0]
        world.clock.set(first_january(world.clock.now()))
        if str(quota_settings.BUDGET_TIME_ZONE) != "UTC":  # as an earlier example left it
            world.time_zone("UTC")
        self.sub, row, raw = world.customer()
        self.model = Money(plan=world.plans["budgeted"], keys=[Key(raw=raw, kid=row.pk, counters=row.pk)])
        self.client = world.client
        self.tag = f"s.{self.sub.pk}"
        self.seen = self.first_alert = self.events_read = len(world.alerts)
        # Another customer on the plan "budgeted", sharing this one's tenant (tenant_requests): taken when first used.
        self.neighbour: tuple[Subscription, APIKey, str] | None = None
        self.sent_once: set[tuple[str, int, float, int]] = set()
        self.days: set[date] = set()  # the usage days of its requests
        # Local allowances: "live" from a request on a plan that has them until they all ended (the spend and the
        # billed usage are then exact again); "bounded" for the rest of the example once it used them (which
        # alerts were sent is then checked against what was spent, not predicted: see check_alerts_bounded).
        self.live = self.bounded = False
        self.own_seen: set[Any] = set()  # the customer threshold events checked (their ids)
        # The most any limit of the model held at the end of a step: an allowance that ends after its period did
        # reports that period's spend, which the model no longer holds now (seed 31: 90 % of a day, reported
        # after the month's end, read as over the new day's 0).
        self.peak = 0

    def teardown(self) -> None:
        # The watcher reads every subscription with thresholds: later examples' looks should not read this one.
        AlertThresholds.objects.filter(subscription=self.sub).delete()

    # Helpers ---------------------------------------------------------------------------------------------------

    def plan_pk(self, slug: str) -> int:
        return self.world.plans[slug].pk

    @property
    def now(self) -> float:
        return self.world.clock.now()

    def usable(self) -> list[Key]:
        return [k for k in self.model.keys if k.usable and (k.expires is None or self.now < k.expires)]

    def key(self, index: int) -> Key:
        keys = self.usable()
        return keys[index % len(keys)]

    def url(self, tail: str) -> str:
        return f"/api/v1/subscriptions/{self.sub.pk}/{tail}"

    def new_alerts(self) -> list[Alert]:
        """The alerts sent for this customer since the last look."""
        fresh = self.world.alerts[self.seen :]
        self.seen = len(self.world.alerts)
        self.sent_limits = [a["limit"] for a in fresh if a["client_tag"] == self.tag]
        for a in fresh:  # a period quota's alerts are counts in its own unit, with no currency
            quota = a["limit"].startswith("q")
            assert a["unit"] == ("requests" if quota else "money"), a
            assert not (quota and a["currency"]), a
        return [
            Alert(a["budget"], a["threshold"], a["period_start"].timestamp(), a["spent_micros"], a["amount_micros"])
            for a in fresh
            if a["client_tag"] == self.tag
        ]

    def expect_alerts(self, expected: list[Alert], step: str) -> None:
        """(e): the alerts sent in this step are the model's."""
        if self.bounded:
            self.check_alerts_bounded(step)
            return
        sent = self.new_alerts()
        for alert, limit in zip(sent, self.sent_limits, strict=True):
            # A limit by its id and amount: two plans' day budgets share a name ("day-budget"), not a counter; a
            # customer's cap lowering a budget shares its id (its counter), not its amount.
            identity = (limit, alert.amount, alert.period_start, alert.threshold)
            if check("alert_once_per_limit_period_threshold"):
                assert identity not in self.sent_once, f"{step}: {alert} sent twice in its period"
            self.sent_once.add(identity)
        key = lambda a: (a.name, a.threshold, a.period_start, a.spent, a.amount)  # noqa: E731
        unexpected = sorted(map(key, sent)) if not expected else sorted(set(map(key, sent)) - set(map(key, expected)))
        missing = sorted(set(map(key, expected)) - set(map(key, sent)))
        if check("alert_only_when_reached"):
            assert not unexpected, f"{step}: alerts the model does not send: {unexpected} (expected {expected})"
        if check("alert_when_reached"):
            assert not missing, f"{step}: alerts missing: {missing} (sent {sent})"

    def check_alerts_bounded(self, step: str) -> None:
        """(e) with local allowances: each alert sent at most once per limit, amount, period and threshold, and
        only for spend committed: what it reports reached its threshold (80 % or more for a refusal's 100 %) and
        is at most what the requests admitted so far were charged (never units an allowance holds unspent)."""
        sent = self.new_alerts()
        for alert, limit in zip(sent, self.sent_limits, strict=True):
            identity = (limit, alert.amount, alert.period_start, alert.threshold)
            if check("alert_once_per_limit_period_threshold"):
                assert identity not in self.sent_once, f"{step}: {alert} sent twice in its period"
            self.sent_once.add(identity)
            period = "day" if "day" in alert.name else "month"
            counter = f"{limit}:{period}" if limit.startswith("kc") else limit
            committed = self.model.spent(counter, period, self.now)
            reached = alert.spent * 100 >= alert.amount * (80 if alert.threshold == 100 else alert.threshold)
            if check("alert_only_when_reached"):
                assert alert.spent <= committed, f"{step}: {alert} of {limit}, whose requests were charged {committed}"
                assert reached or alert.amount <= 0, f"{step}: {alert} of {limit} below its threshold"

    def expect_own(self, expected: list[tuple[str, int, int]] | None, step: str) -> None:
        """(e) for the customer's own thresholds: the ``spend.threshold_reached`` events recorded in this step are
        the model's, (name, percent, spent) each; None (or once allowances made the alerts bounded): each reached
        its percent of its amount, with a currency, and reports no more than the requests admitted were charged."""
        rows = list(Event.objects.filter(subscription=self.sub, type=SPEND_THRESHOLD).exclude(pk__in=self.own_seen))
        self.own_seen.update(e.pk for e in rows)
        sent = sorted((e.data["budget"], e.data["threshold"], to_micros(Decimal(e.data["spent"]))) for e in rows)
        for e in rows:
            assert e.data["currency"], f"{step}: {e.data} without a currency"
            spent, amount = to_micros(Decimal(e.data["spent"])), to_micros(Decimal(e.data["amount"]))
            assert spent * 100 >= amount * e.data["threshold"], f"{step}: {e.data} below its threshold"
        if expected is None or self.bounded:
            most = max(self.peak, self.committed_now())
            assert all(spent <= most for _, _, spent in sent), f"{step}: {sent} over {most}"
            return
        if check("customer_threshold_per_limit"):
            assert sent == expected, f"{step}: the customer's threshold events {sent}, the model's {expected}"

    # Requests --------------------------------------------------------------------------------------------------

    #: One priced request: how its actual cost compares with its estimate, its estimate, and how far off it is.
    REQUEST = st.tuples(
        st.sampled_from(["equal", "equal", "below", "above", "fail"]), st.sampled_from(ESTIMATES), st.integers(0, 100)
    )

    @rule(k=st.integers(0, 3), requests=st.lists(REQUEST, min_size=1, max_size=3))
    def priced_requests(self, k: int, requests: list[tuple[str, int | None, int]]) -> None:
        """A few requests in a row with one key (requests are what money is about, and cheaper than a step's
        checks: a step of several makes more of each example)."""
        key = self.key(k)
        for kind, est, fraction in requests:
            path, estimate, charged = self.request_of(kind, est, fraction)
            self.exchange(key, f"GET {path}", estimate, charged, 500 if kind == "fail" else 200, self.get(key, path))

    #: One of a burst's requests: how its actual cost compares with the burst's estimate, and how far off it is.
    BURST = st.tuples(st.sampled_from(["equal", "equal", "below", "above", "fail"]), st.integers(0, 100))

    # Three at least, of one estimate: a process takes an allowance for a client's second request like it, and
    # serves the third from it.
    @rule(
        k=st.integers(0, 3),
        est=st.sampled_from(ESTIMATES),
        requests=st.lists(BURST, min_size=3, max_size=4),
        end=st.booleans(),
    )
    def elsewhere_requests(self, k: int, est: int | None, requests: list[tuple[str, int]], end: bool) -> None:
        """A few requests with one key and one estimate decided and settled by another process (an Engine of its
        own on the same store and clock: its own rules snapshot, allowances and poller), first visited by its
        poller (which sees the rules version the changes since its last visit moved). On the plan "busy" both
        processes hold allowances for the same limits: spend and billed usage stay within the model's bound
        while they are live, each process's excess adding to the others' (docs/concepts.md, "Overspend
        window"), and are exact once both ended; each alert is still sent once. ``end``: then every allowance
        ends (allowances_end: in 8 steps, that rule rarely came after allowances in both processes)."""
        self.world.other_polls()
        key = self.key(k)
        for kind, fraction in requests:
            path, estimate, charged = self.request_of(kind, est, fraction, view="/t/priced-elsewhere")
            step = f"GET {path} (another process)"
            self.exchange(key, step, estimate, charged, 500 if kind == "fail" else 200, self.get(key, path), 1)
        if end and self.live:
            self.allowances_end()

    @rule(k=st.integers(0, 3), request=REQUEST, cut=st.booleans())
    def priced_stream(self, k: int, request: tuple[str, int | None, int], cut: bool) -> None:
        """A priced streamed response, settled when its body ends (docs/concepts.md, "Streamed responses"): read
        to its end, it is charged the cost its body reports at its end (nothing when the body fails midway: a
        failed request); ``cut``, the client goes away after the first chunk (the server closes the response)
        and it is charged what the body reported by then, in a ``finally`` (here what ``below`` or ``above``
        says), else its estimate."""
        kind, est, fraction = request
        key = self.key(k)
        path, estimate, charged = self.request_of(kind, est, fraction, view="/t/priced-stream", cut=cut)
        step = f"GET {path}" + (", cut after its first chunk" if cut else ", read to its end")
        self.exchange(key, step, estimate, charged, 200, self.stream(key, path, cut))

    #: GraphQL documents of complexity 1, 3 and 8 (docs/graphql.md, "Complexity").
    DOCUMENTS = {"{ __typename }": 1, "{ books { title } }": 3, "{ books { title author { name } } }": 8}

    @precondition(lambda self: money_urls.GRAPHQL)
    @rule(k=st.integers(0, 3), batch=st.lists(st.sampled_from(sorted(DOCUMENTS)), min_size=1, max_size=3))
    def graphql_batch(self, k: int, batch: list[str]) -> None:
        """A GraphQL batch on the priced scope (docs/graphql.md): decided once with the sum of its operations'
        complexities as its weight, priced per unit of it (all of it admitted, or none); a batch over the
        endpoint's cap spends 1 unit, and its price, and is answered 400; a period quota counts it as one
        request."""
        key = self.key(k)
        weight = sum(self.DOCUMENTS[query] for query in batch)
        over = weight > money_urls.GRAPHQL_CAP
        estimate = self.model.plan.price * (1 if over else weight)
        body = json.dumps([{"id": n, "query": query} for n, query in enumerate(batch)])

        def send() -> tuple[int, set[str]]:
            response = self.client.post(
                "/t/graphql-batch", body, content_type="application/json", HTTP_X_API_KEY=key.raw
            )
            if response.status_code == 429:
                return 429, set(response.json()["errors"][0]["extensions"]["violated_policies"])
            if response.status_code == 200:  # each operation ran, in the batch's order
                assert [item["id"] for item in response.json()] == list(range(len(batch))), response.content
            return response.status_code, set()

        self.exchange(key, f"POST a GraphQL batch of {weight}: {batch}", estimate, estimate, 400 if over else 200, send)

    @rule(
        k=st.integers(0, 3),
        neighbour=st.sampled_from([0, 3, 6]),
        requests=st.lists(REQUEST, min_size=1, max_size=2),
    )
    def tenant_requests(self, k: int, neighbour: int, requests: list[tuple[str, int | None, int]]) -> None:
        """Requests to a view with two throttle classes (tests/quotas/money_urls.py: QuotaThrottle, then a class
        counting the plan's limits per tenant), the tenant shared with another customer on the plan "budgeted"
        (the neighbour), who first sends ``neighbour`` requests at the price. Once the tenant's period quota is
        spent, the tenant class refuses what the customer's own limits admit: (c) that request is charged nothing,
        in its budgets, period quota or billed usage (its first decision is withdrawn), and sends no alert."""
        if self.neighbour is None:
            self.neighbour = self.world.customer()
        tenant = f"t{self.sub.pk}"
        for _ in range(neighbour):
            response = self.client.get("/t/priced-tenant", HTTP_X_API_KEY=self.neighbour[2], HTTP_X_TENANT=tenant)
            if response.status_code == 200:  # its own limits and the tenant's admitted it: the tenant counted it
                self.tenant_counts(self.world.plans["budgeted"])
        key = self.key(k)
        for kind, est, fraction in requests:
            path, estimate, charged = self.request_of(kind, est, fraction, view="/t/priced-tenant")
            step = f"GET {path} with key {key.kid}, tenant {tenant}"
            send = self.get(key, path, tenant=tenant)
            full = self.tenant_full()
            if self.live or not full or self.model.refusing(key, estimate, self.now):
                # The tenant admits it, or the customer's own limits refuse it first (the tenant's class never
                # runs), or an allowance decides (exchange then checks a 429 names limits in force).
                status = self.exchange(key, step, estimate, charged, 500 if kind == "fail" else 200, send)
                if status != 429:
                    self.tenant_counts(self.model.plan)
                continue
            self.days.add(datetime.strptime(day_of(self.now), "%Y%m%d").date())  # billed there, were it charged
            status, policies = send()
            assert status == 429, f"{step}: {status}, the tenant's {full} spent"
            assert policies == full, f"{step}: refused by {policies}, the tenant's {full} spent"
            self.expect_alerts([], step)
            self.expect_own([], step)

    def tenant_full(self) -> set[str]:
        """The period quotas of the customer's plan the tenant has spent (counted as the neighbour's and this
        customer's requests to /t/priced-tenant were admitted)."""
        return {
            name
            for pk, name, period, units in self.model.plan.quotas
            if self.model.spent(f"tenant:q{pk}", period, self.now) + 1 > units
        }

    def tenant_counts(self, plan: Plan) -> None:
        """A request to /t/priced-tenant admitted on ``plan``: the tenant's period quotas count it."""
        for pk, _, period, _ in plan.quotas:
            counter = f"tenant:q{pk}"
            end = self.model.end_of(counter, period, self.now)
            self.model.counters[counter] = (end, self.model.spent(counter, period, self.now) + 1)

    def request_of(
        self, kind: str, est: int | None, fraction: int, view: str = "/t/priced", cut: bool = False
    ) -> tuple[str, int, int]:
        """The path of a priced request to ``view``, its estimate and what it is charged admitted (see REQUEST);
        ``cut``: a stream closed after its first chunk, which reports ``below``'s or ``above``'s cost then (and
        never reaches a failure, nor reports an ``equal``'s: its estimate stands)."""
        estimate = self.model.plan.price if est is None else est
        query = [] if est is None else [f"est={money(est)}"]
        actual = estimate
        if kind == "below":
            actual = estimate * fraction // 101
        elif kind == "above":
            actual = estimate + 1 + estimate * 2 * fraction // 100
        if kind in ("below", "above"):
            query.append(f"{'partial' if cut else 'actual'}={money(actual)}")
        if kind == "fail":
            query.append("fail=1")
        charged = 0 if kind == "fail" and not cut else actual
        return view + ("?" + "&".join(query) if query else ""), estimate, charged

    def get(self, key: Key, path: str, tenant: str = "") -> Callable[[], tuple[int, set[str]]]:
        """A GET of ``path`` with ``key`` (for ``tenant``, if one): its status, and the limits a 429 names."""

        def send() -> tuple[int, set[str]]:
            headers = {"HTTP_X_TENANT": tenant} if tenant else {}
            response = self.client.get(path, HTTP_X_API_KEY=key.raw, **headers)
            refused = response.status_code == 429
            return response.status_code, set(response.json().get("violated_policies", [])) if refused else set()

        return send

    def stream(self, key: Key, path: str, cut: bool) -> Callable[[], tuple[int, set[str]]]:
        """A GET of the streamed ``path`` with ``key``, its body read to its end (the test client then closes the
        response, as a server does), or ``cut`` after its first chunk (the response closed then)."""

        def send() -> tuple[int, set[str]]:
            if cut:
                # Through the handler itself: the test client wraps a streamed body so that closing it closes the
                # response, and that wrapper connects close_old_connections again before close() sends
                # request_finished, which then closed the test's database connection (PostgreSQL).
                response = self.world.handler.get_response(RequestFactory().get(path, HTTP_X_API_KEY=key.raw))
            else:
                response = self.client.get(path, HTTP_X_API_KEY=key.raw)
            if response.status_code != 200:
                return response.status_code, set(json.loads(response.content).get("violated_policies", []))
            chunks = iter(response.streaming_content)
            assert next(chunks) == b"one "
            if cut:
                # The server closes the response of a client gone (close(), which sends request_finished), without
                # closing the test's database connection in its transaction, as the test client does.
                request_finished.disconnect(close_old_connections)
                try:
                    response.close()
                finally:
                    request_finished.connect(close_old_connections)
            else:
                try:
                    assert b"".join(chunks) == b"two"
                except RuntimeError:  # the body failed midway: its headers (200) had gone out
                    assert "fail=1" in path
            return 200, set()

        return send

    def exchange(
        self,
        key: Key,
        step: str,
        estimate: int,
        charged: int,
        ok: int,
        send: Callable[[], tuple[int, set[str]]],
        process: int = 0,
    ) -> int:
        """One priced request with ``key`` estimated at ``estimate``, charged ``charged`` if admitted (answered
        ``ok`` then): ``send()`` makes it, and says its status and the limits a 429 named. ``process``: the one
        that decides it (0: the machine's, 1: another). Returns its status."""
        self.days.add(datetime.strptime(day_of(self.now), "%Y%m%d").date())  # the usage hash it counts in
        step += f" with key {key.kid}"
        if self.model.plan.allowances:
            self.live = self.bounded = True
        if self.live:
            # An allowance may admit it when Redis would not (its units were taken ahead), or the units it holds
            # may refuse it: what was admitted is charged, and the spend's bound is checked after the step.
            status, policies = send()
            if status == 429:
                assert policies <= {w.name for w in self.model.windows(key)}, f"{step}: refused by {policies}"
            else:
                assert status == ok, f"{step}: {status}"
                self.model.charge(key, estimate, charged, self.now, process=process)
            self.check_alerts_bounded(step)
            self.expect_own(None, step)
            return status
        before = {w.counter: self.model.used(w, self.now) for w in self.model.windows(key)}
        refused, expected = self.model.request(key, estimate, charged, self.now)
        status, policies = send()
        if refused:
            assert status == 429, f"{step}: {status}, the model refuses by {refused}"
            assert policies == {w.name for w in refused}, f"{step}: refused by {policies}, the model by {refused}"
        else:
            assert status == ok, f"{step}: {status}, the model admits it"
        self.expect_alerts(expected, step)
        self.expect_own([] if refused or self.bounded else self.model.crossed(key, before, self.now), step)
        return status

    @precondition(lambda self: self.world.proxy is not None and not self.live and not self.model.plan.allowances)
    @rule(
        k=st.integers(0, 3),
        fault=st.sampled_from(["lost reply", "Redis error", "Redis error, then the process exits"]),
        more=st.sampled_from([0, 1, 5]),
    )
    def settle_with_a_fault(self, k: int, fault: str, more: int) -> None:
        """A request costing ``more`` times its estimate more than it, whose settlement Redis ran but whose reply
        was lost (the retry must change nothing), or failed (Redis away while the view ran: owed in the process,
        charged at the poller's visit once Redis is back); then the poller visits. "then the process exits": the
        process exits before Redis is back (its engine closed: what it owes is spooled) and the next process (the
        engine's new runtime, on the same spool directory) charges it at its poller's first visit, so the budgets
        and billed usage hold the actual cost (a) (b). Redis only."""
        proxy = self.world.proxy
        assert proxy is not None
        key = self.key(k)
        estimate = self.model.plan.price
        actual = estimate * (1 + more)
        path = f"/t/priced?actual={money(actual)}"
        if fault == "lost reply":
            proxy.arm(b"adjust")
        else:
            path += "&during=1"
            urls.DURING_VIEW[:] = [lambda: setattr(proxy, "down", True)]
        before = {w.counter: self.model.used(w, self.now) for w in self.model.windows(key)}
        refused, expected = self.model.request(key, estimate, actual, self.now)
        self.days.add(datetime.strptime(day_of(self.now), "%Y%m%d").date())
        try:
            response = self.client.get(path, HTTP_X_API_KEY=key.raw)
            if fault.endswith("exits"):
                default_engine.reset()  # the process exits (a graceful shutdown), Redis still away
        finally:
            urls.DURING_VIEW.clear()
            proxy.disarm()
            proxy.down = False
        step = f"GET {path} with key {key.kid}, {fault} at its settlement"
        assert response.status_code == (429 if refused else 200), (step, response.content[:300])
        # What the poller does every second (the next process's, after an exit): an owed settlement is charged.
        default_engine.runtime().tick()
        # The thresholds its decision reached go with the settlement Redis did not confirm: its charge by the
        # poller (a retry that changes nothing after a lost reply) reports them once, with the spend settled.
        self.expect_alerts(expected, step)
        # The customer's thresholds the estimate crossed are reported at the settlement with the estimate's spend;
        # those the rest crossed, by the poller's charge of it, with the spend then.
        first = estimate if actual != estimate else 0
        self.expect_own([] if refused else self.model.crossed(key, before, self.now, first=first), step)

    @precondition(lambda self: self.world.proxy is not None and not self.live and not self.model.plan.allowances)
    @rule(k=st.integers(0, 3), requests=st.lists(REQUEST, min_size=1, max_size=4))
    def redis_outage(self, k: int, requests: list[tuple[str, int | None, int]]) -> None:
        """Redis is away for a few requests, then back, and the poller visits. The local fallback (FAILURE_MODE
        'local', LOCAL_SHARE 0.5, one process) admits some: which is not predicted; what it admitted is charged
        to the budgets at the visit (not to period quotas) and counted in usage, so spend and billed usage are
        the model's again after it, within the outage's bound. Its alerts are checked against the spend (as
        with allowances) from then on. Redis only."""
        proxy = self.world.proxy
        assert proxy is not None
        key = self.key(k)
        before = {w.counter: self.model.used(w, self.now) for w in self.model.windows(key)}
        excess = 0
        proxy.down = True
        try:
            for kind, est, fraction in requests:
                path, estimate, charged = self.request_of(kind, est, fraction)
                self.days.add(datetime.strptime(day_of(self.now), "%Y%m%d").date())
                response = self.client.get(path, HTTP_X_API_KEY=key.raw)
                if response.status_code != 429:
                    assert response.status_code == (500 if kind == "fail" else 200), (path, response.content[:300])
                    self.model.charge(key, estimate, charged, self.now, quotas=False)
                    excess += max(0, charged - estimate)
        finally:
            proxy.down = False
        self.model.outage_bound(key, before, float(quota_settings.LOCAL_SHARE), excess, self.now)
        default_engine.runtime().tick()
        self.bounded = True
        self.check_alerts_bounded("Redis back, the poller's visit")
        self.expect_own(None, "Redis back, the poller's visit")

    @precondition(lambda self: self.live)
    @rule()
    def allowances_end(self) -> None:
        """Every allowance ends in both processes (as at exit, or at the poller's visit after HORIZON), and their
        pollers visit: their unused units go back, the alerts their spend reached are sent, and the requests they
        admitted are written to the usage counters."""
        for runtime in (default_engine.runtime(), self.world.other.runtime()):
            runtime.settle_allowances(everything=True)
            runtime.tick()
        self.model.allowances_ended()
        self.check_alerts_bounded("the allowances' end")
        self.expect_own(None, "the allowances' end")
        self.live = False

    # The customer's caps and a key's ----------------------------------------------------------------------------

    @rule(period=st.sampled_from(PERIODS), amount=st.sampled_from((None, *CAP_AMOUNTS)))
    def set_cap(self, period: str, amount: int | None) -> None:
        """The customer's cap of ``period`` set to ``amount``, or removed (None)."""
        if amount is None:
            response = self.world.owner_api.delete(self.url(f"caps/{period}"))
            expected = (204, 200) if period in self.model.caps else (204, 200, 404)
            assert response.status_code in expected, response.content
            self.model.caps.pop(period, None)
            return
        response = self.world.owner_api.put(self.url(f"caps/{period}"), {"amount": money(amount)}, format="json")
        budget = self.model.plan.budgets.get(period)
        if budget is None or amount > budget[2]:
            assert response.status_code == 400, response.content
            return
        assert response.status_code == 200, response.content
        self.model.caps[period] = amount

    @rule(k=st.integers(0, 3), period=st.sampled_from(PERIODS), amount=st.sampled_from((None, *CAP_AMOUNTS)))
    def set_key_cap(self, k: int, period: str, amount: int | None) -> None:
        """A key's own cap of ``period`` set to ``amount``, or removed (None)."""
        key = self.key(k)
        cap = None if amount is None else {"period": period, "amount": money(amount)}
        response = self.world.owner_api.put(
            self.url(f"keys/{key.kid}/limits"), {"own_rates": "", "cap": cap}, format="json"
        )
        budget = self.model.plan.budgets.get(period)
        if amount is not None and (budget is None or amount > budget[2]):
            assert response.status_code == 400, response.content
            return
        assert response.status_code == 200, response.content
        key.cap = None if amount is None else (period, amount)

    #: The customer's thresholds an example may set.
    PERCENTS = st.sampled_from([(), (50,), (10, 90), (25, 50, 75, 100)])

    # Most examples start with thresholds (the spend then crosses them through every rule, plan changes included:
    # a rule alone rarely comes before enough of the others in 8 steps); a rule may change them later.
    @initialize(percents=PERCENTS)
    def first_thresholds(self, percents: tuple[int, ...]) -> None:
        """The customer's own alert thresholds as the example starts (none: nothing set)."""
        if percents:
            self.set_thresholds(percents)

    # One example in four starts on the plan "busy": allowances in two processes (elsewhere_requests) need the plan
    # and a burst in each process, which a plan change drawn later rarely left room for in 8 steps (150 examples per
    # store, the plan reached by a change only: no allowance of the other process was live at allowances_end).
    # SCENARIOS' "allowances_in_two_processes" covers their end on every run.
    @initialize(slug=st.sampled_from(["budgeted", "budgeted", "budgeted", "busy"]))
    def first_plan(self, slug: str) -> None:
        """The plan the example starts on."""
        if slug != "budgeted":
            self.change_plan(slug)

    @rule(percents=PERCENTS)
    def set_thresholds(self, percents: tuple[int, ...]) -> None:
        """The customer's own alert thresholds set (console API)."""
        response = self.world.owner_api.put(self.url("thresholds"), {"percents": list(percents)}, format="json")
        assert response.status_code == 200, response.content
        self.model.thresholds = list(percents)

    @precondition(lambda self: not self.live and self.model.thresholds)
    @rule(ahead=st.sampled_from([0, 0, 5]))
    def watcher_visit(self, ahead: int) -> None:
        """The watcher's look (about once a minute): an event per customer threshold reached that no spend crossed
        (set, or a cap lowered, after the spend passed it). Its host's clock is ``ahead`` seconds ahead of the
        decisions' (Redis's, here the injected clock): a look in the last seconds of a period sees the period the
        ledger counts, whatever the host says (after move_time's "day-1", the host is past midnight)."""
        watch(datetime.fromtimestamp(self.now + ahead, UTC))
        self.expect_own(None if self.bounded else self.model.threshold_events(self.now), "the watcher's look")

    # Keys ------------------------------------------------------------------------------------------------------

    @rule(k=st.integers(0, 3), overlap=st.sampled_from([0, 0, 3_600, 86_400]))
    def roll_key(self, k: int, overlap: int) -> None:
        """Rolled, with an overlap or none: the successor spends the same counters and keeps the cap; the
        predecessor works until its overlap ends. (That end is the wall clock's now plus the overlap, which the
        injected clock, a year or more ahead, has passed already: it stops at once here, and is refused.)"""
        key = self.key(k)
        body = {"overlap_seconds": overlap}
        response = self.world.owner_api.post(self.url(f"keys/{key.kid}/roll"), body, format="json")
        assert response.status_code == 201, response.content
        body = response.json()
        key.expires = datetime.fromisoformat(body["replaces"]["expires_at"]).timestamp()
        self.model.keys.append(Key(raw=body["key"], kid=body["id"], counters=key.counters, cap=key.cap))
        if key not in self.usable():
            refused = self.client.get("/t/priced", HTTP_X_API_KEY=key.raw)
            assert refused.status_code in (401, 403), f"the rolled key {key.kid} after its overlap: {refused.content}"

    @rule(k=st.integers(0, 3))
    def revoke_key(self, k: int) -> None:
        """A key revoked (console API): refused at once (its spend stays the subscription's: the invariants read
        the budgets through the keys left), and never charged again; a revoked key cannot be rolled. The last
        usable key revoked, a new one is issued (as its customer would)."""
        key = self.key(k)
        response = self.world.owner_api.post(self.url(f"keys/{key.kid}/revoke"))
        assert response.status_code == 200, response.content
        key.usable = False
        refused = self.client.get("/t/priced", HTTP_X_API_KEY=key.raw)
        assert refused.status_code in (401, 403), f"the revoked key {key.kid}: {refused.status_code}"
        rolled = self.world.owner_api.post(self.url(f"keys/{key.kid}/roll"), {"overlap_seconds": 0}, format="json")
        assert rolled.status_code == 400, f"the revoked key {key.kid} rolled: {rolled.content}"
        if not self.usable():
            self.new_key()

    @precondition(lambda self: len(self.usable()) < 2)  # a third key costs every step its lookups, tests nothing new
    @rule()
    def new_key(self) -> None:
        row, raw = APIKey.issue(self.sub)
        self.model.keys.append(Key(raw=raw, kid=row.pk, counters=row.pk))

    # The plan --------------------------------------------------------------------------------------------------

    @rule(slug=st.sampled_from(sorted(PLANS)))
    def change_plan(self, slug: str) -> None:
        self.sub.plan_id = self.plan_pk(slug)
        self.sub.save()
        self.model.plan = self.world.plans[slug]

    @precondition(lambda self: not self.live)
    @rule(tz=st.sampled_from(["UTC", "America/New_York", "Asia/Tokyo"]))
    def change_time_zone(self, tz: str) -> None:
        """BUDGET_TIME_ZONE moved (or not): days and months begin where it says. (A settings change rebuilds
        the engine's runtime, as a deployment's restart would: no allowance may be live across it.)"""
        self.world.time_zone(tz)
        self.model.tz = tz

    # Time and the poller ---------------------------------------------------------------------------------------

    @rule(to=st.sampled_from(["day", "month", "day-1", "month-1", 1, 60, 3_600]))
    def move_time(self, to: str | int) -> None:
        """The injected clock moved on: to just after the end of the day or the month holding now, or just
        before it ("-1"), or by some seconds. The usage is flushed to the database first, as the scheduled flush
        does every few minutes (a day's usage hash expires days after)."""
        if isinstance(to, int):
            target = self.now + to
        else:
            period, _, before = to.partition("-")
            target = period_end(period, self.now, self.model.tz) + (-1 if before else 1)
        if target > self.now:
            flush_usage()
            self.world.clock.set(target)

    @rule()
    def poller_tick(self) -> None:
        default_engine.runtime().tick()
        self.expect_alerts([], "the poller's visit")
        self.expect_own([], "the poller's visit")

    @rule(k=st.integers(0, 3))
    def usage_api(self, k: int) -> None:
        """(a) through the usage API, as the customer reads it."""
        key = self.key(k)
        body = self.client.get("/api/v1/usage/current", HTTP_X_API_KEY=key.raw).json()
        shown = {b["name"]: Decimal(b["spent"]) for b in body["budgets"]}
        assert shown == self.model_spent(key) or self.live, f"the usage API for key {key.kid}: {body['budgets']}"

    # Invariants ------------------------------------------------------------------------------------------------

    def model_spent(self, key: Key) -> dict[str, Decimal]:
        """What the model says each money limit of ``key`` spent (as the standing shows budgets)."""
        return {w.name: from_micros(self.model.used(w, self.now)) for w in self.model.windows(key) if w.unit == "money"}

    def model_counted(self, key: Key) -> dict[str, int]:
        """What the model says each period quota of ``key`` has counted this period."""
        return {w.name: self.model.used(w, self.now) for w in self.model.windows(key) if w.unit != "money"}

    def committed_now(self) -> int:
        """The most any limit of the model holds now."""
        return max((self.model.used(w, self.now) for k in self.model.keys for w in self.model.windows(k)), default=0)

    @invariant()
    def spend_is_the_models(self) -> None:
        """(a), (c), (d): every limit in force for every key holds what the model charged it, within bounds."""
        self.peak = max(self.peak, self.committed_now())
        for key in self.usable():
            if not check("standing_after_a_plan_change"):
                default_engine.runtime().rules.current()
            now = standing(identify(RequestFactory().get("/", HTTP_X_API_KEY=key.raw)))
            budgets = now["budgets"]
            # A period quota's remaining, as the standing's peek shows it, is after one more request or (when
            # another limit refuses that request, in some cases) before it: the count is one of the two.
            quotas = {
                x["name"]: (x["quota"], x["remaining"]) for x in now["limits"] if x["algorithm"] == "period_requests"
            }
            counted = self.model_counted(key)
            assert quotas.keys() == counted.keys(), f"key {key.kid}: {now['limits']}"
            for name, (amount, left) in quotas.items():
                assert left in (max(0, amount - counted[name] - 1), max(0, amount - counted[name])), (
                    f"key {key.kid}: {name} has {left} left, the model counted {counted[name]} of {amount}"
                )
            shown = {b["name"]: Decimal(b["spent"]) for b in budgets}
            if self.live:  # spend an allowance admitted is committed (and shown) when the allowance ends
                model = self.model_spent(key)
                assert shown.keys() == model.keys(), f"key {key.kid}: {budgets}"
                assert all(shown[name] <= model[name] for name in model), f"{key.kid}: {budgets}, {model}"
            else:
                assert shown == self.model_spent(key), f"key {key.kid}: {budgets} (model {self.model.windows(key)})"
            for window in self.model.windows(key):
                if window.unit != "money":
                    continue  # counted a request at a time: never over (the check above)
                spent = shown[window.name]
                assert spent <= from_micros(self.model.ceiling(window, self.now)) or spent == 0, (
                    f"{window} overspent: {spent}"
                )

    @invariant()
    def events_are_the_alerts(self) -> None:
        """(f): each alert of this customer (its keys', and its tenant's) is a ``budget.threshold_crossed`` event
        of its own, one per client, limit, period and threshold (two keys' caps are two events, each naming its
        key), as the first alert of it said: a money limit's spend and amount in the plans' currency, a period
        quota's count in its unit, with no money. (Read when an alert was sent since the last look: an event is
        recorded only by an alert's receiver, and the read cost every step 12 ms, as much as a request.)"""
        if len(self.world.alerts) == self.events_read:
            return
        self.events_read = len(self.world.alerts)
        first: dict[tuple[str, str, datetime, int], dict[str, Any]] = {}
        for a in self.world.alerts[self.first_alert :]:
            if a["subscription_id"] == self.sub.pk:
                first.setdefault((a["client_tag"], a["limit"], a["period_start"], a["threshold"]), a)
        expected = []
        for a in first.values():
            kid = int(a["limit"][2:]) if a["limit"].startswith("kc") else None
            if a["unit"] == "money":
                amounts = (from_micros(a["spent_micros"]), from_micros(a["amount_micros"]), self.world.currency)
            else:
                amounts = (Decimal(a["spent_micros"]), Decimal(a["amount_micros"]), a["unit"])
            expected.append((a["budget"], a["threshold"], a["period_start"].isoformat(), kid, *amounts))
        recorded = []
        for data in Event.objects.filter(subscription=self.sub, type=BUDGET_THRESHOLD).values_list("data", flat=True):
            data = json.loads(data) if isinstance(data, str) else data
            kid = data["key"]["id"] if "key" in data else None
            if "currency" in data:
                amounts = (Decimal(data["spent"]), Decimal(data["amount"]), data["currency"])
            else:
                amounts = (Decimal(data["used"]), Decimal(data["limit"]), data["unit"])
            recorded.append((data["budget"], data["threshold"], data["period_start"], kid, *amounts))
        assert sorted(recorded) == sorted(expected), f"budget.threshold_crossed events {recorded}, alerts {expected}"

    @invariant()
    def billed_usage_is_the_actual_costs(self) -> None:
        """(b): the usage counters' cost is every admitted request's actual cost: each usage day's counters in the
        store, or its flushed rows once its hash expired. (The days are those the model billed in: a scan of
        the keyspace, which every example adds to, cost more than the rest of the step.)"""
        store = client_of(default_engine.runtime())
        prefix, field = str(quota_settings.KEY_PREFIX), f"{self.tag}|"
        days: dict[date, int] = {}
        for day in self.days:
            counters = store.hgetall(usage_key(prefix, self.tag, day))
            if counters:
                costs = [int(v) for f, v in counters.items() if f.decode().startswith(field) and f.endswith(b"|c")]
                days[day] = sum(costs)
        if len(days) < len(self.days):
            rows = UsageRecord.objects.filter(client=self.tag, day__in=self.days - set(days))
            for day, cost in rows.values_list("day", "cost_micros"):
                days[day] = days.get(day, 0) + cost
        if self.live:  # an allowance's requests are counted when it ends
            assert sum(days.values()) <= self.model.billed, days
        else:
            assert sum(days.values()) == self.model.billed, days


@pytest.fixture
def proxy(request, set_quotas) -> Iterator[ReplyLosingProxy | None]:
    """On Redis, the engine talks to the redis-server through a proxy that can lose a reply or be down
    (tests/lost_replies.py); None on the memory store."""
    if not request.node.get_closest_marker("redis"):
        yield None
        return
    proxy = ReplyLosingProxy(upstream=request.getfixturevalue("redis_server").port).start()
    # Every reply crosses the proxy's threads, in this process, on cores shared with other test runs: a reply
    # late by SOCKET_TIMEOUT's 0.25 s (or a connection by CONNECT_TIMEOUT's 50 ms) sent a step the model says
    # Redis decides to the failure mode instead, now and then (a decision admitted locally: its usage waits in
    # the process, and billed usage read 30,000 against the model's 32,277, which no replay could repeat). The
    # faults the rules mean are immediate: a lost reply or Redis away closes the connection, so nothing waits.
    set_quotas(REDIS_URL=proxy.url, SOCKET_TIMEOUT=10.0, CONNECT_TIMEOUT=10.0)
    yield proxy
    proxy.stop()


@pytest.fixture
def world(db, quota_clock, set_quotas, proxy, monkeypatch) -> Iterator[World]:
    """The plans, their owner signed in, local allowances on one plan and the self-service APIs unthrottled (the
    machine reads them after every step); the alerts sent, recorded; another process's engine, on the same store
    and clock, for /t/priced-elsewhere."""
    # A client is busy from its second request (the injected clock stands still between requests) and takes up
    # to 4 requests' units at once, as much as its limits have left; only the plan "busy" lets it.
    set_quotas("ALLOWANCES", ENABLED=True, MIN_RATE=1, HORIZON=10.0, SHARE=1.0, MAX_REQUESTS=4)
    # The machine is the poller: it ticks where a step says (a fault's retry, the poller's visit, an allowance's
    # end). The runtime's own poller thread (every RULES_CHECK_INTERVAL, 1 s of real time) ticked between a step's
    # calls when the machine ran slowly: it charged a failed settlement before the step's tick, and recorded the
    # customer's threshold it crossed on its own database connection, which cannot see the example's rows (one
    # transaction), so the event was missing; a replay ran at another speed and passed (flaky).
    set_quotas(RULES_CHECK_INTERVAL=3600)
    set_quotas("CONSOLE", API_RATE=None)
    set_quotas(USAGE_API_RATE=None)
    set_quotas(
        FAILED_AUTH_LIMITS=None, BUDGET_TIME_ZONE="UTC"
    )  # a rolled key refused is a failure of the one test address: not counted
    plans = {}
    for slug, (price, budgets, allowances) in PLANS.items():
        row = PlanFactory(slug=slug, local_allowances=allowances)
        EndpointLimitFactory(plan=row, name="priced", scope="priced", rates="1000000/min", price=from_micros(price))
        model = Plan(slug=slug, price=price, pk=row.pk, allowances=allowances)
        for period, amount in budgets.items():
            budget = CostBudget.objects.create(plan=row, period=period, amount=from_micros(amount))
            model.budgets[period] = (budget.pk, budget.name, amount)
        if slug == "budgeted":
            name, period, units = QUOTA
            quota = PeriodQuota.objects.create(plan=row, name=name, scope="priced", period=period, units=units)
            model.quotas.append((quota.pk, name, period, units))
        plans[slug] = model
    owner = UserFactory(username="owner")
    owner_api = APIClient()
    owner_api.force_authenticate(owner)  # no session to read on every call
    alerts: list[dict[str, Any]] = []

    def receiver(sender: Any, **kwargs: Any) -> None:
        alerts.append(kwargs)

    budget_threshold_crossed.connect(receiver, weak=False)
    other = Engine(clock=quota_clock)  # the process's settings: the same store and KEY_PREFIX, so the same counters
    monkeypatch.setattr(money_urls.ElsewhereThrottle, "engine", other)

    def rules_moved(sender: Any, **kwargs: Any) -> None:
        WORLD[0].rules_moved = True

    for model in WATCHED:
        post_save.connect(rules_moved, sender=model, dispatch_uid=f"money-machine-{model.__name__}", weak=False)
        post_delete.connect(rules_moved, sender=model, dispatch_uid=f"money-machine-{model.__name__}", weak=False)
    handler = BaseHandler()
    handler.load_middleware()
    WORLD[:] = [
        World(
            plans=plans,
            owner=owner,
            owner_api=owner_api,
            client=APIClient(raise_request_exception=False),
            clock=quota_clock,
            alerts=alerts,
            customers=[],
            proxy=proxy,
            other=other,
            handler=handler,
            currency=CostBudget.objects.filter(plan__slug="budgeted").values_list("currency", flat=True)[0],
        )
    ]
    yield WORLD[0]
    budget_threshold_crossed.disconnect(receiver)
    for model in WATCHED:
        post_save.disconnect(sender=model, dispatch_uid=f"money-machine-{model.__name__}")
        post_delete.disconnect(sender=model, dispatch_uid=f"money-machine-{model.__name__}")
    other.reset()
    WORLD.clear()


STORES = [pytest.param("memory", id="memory"), pytest.param("redis", id="redis", marks=pytest.mark.redis)]


@pytest.mark.parametrize("store", STORES)
def test_money_follows_the_model(store: str, world: World) -> None:
    """Whatever the steps, the service's money state is the model's after each one (see the module docstring)."""
    run_state_machine_as_test(
        MoneyMachine,
        settings=settings(
            max_examples=EXAMPLES,
            stateful_step_count=STEPS,
            deadline=None,
            # `make test` draws the same examples every run, so a red CI is a change's, not a new draw's (a run
            # found a failure in one draw of several this morning); the nightly profile draws new ones each night.
            derandomize=not NIGHTLY and DRAW is None,
            # No "explain" phase: it traces every line the service runs, minutes on a failure, for little here.
            phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        ),
    )


#: Findings the machine made, each as the steps Hypothesis printed, replayed on every run (a draw of EXAMPLES
#: examples need not meet them again): the name of the check that caught it, and its steps.
FINDINGS = {
    # A customer's threshold was reported once per budget *name*, period and percent, so after a plan change within
    # a day the new plan's budget of the same name ("day-budget": another limit, its own counter from 0) never
    # reported the thresholds the old one had.
    "customer_threshold_per_limit": [
        ("set_thresholds", {"percents": (10,)}),
        ("priced_requests", {"k": 0, "requests": [("equal", None, 0)]}),
        ("change_plan", {"slug": "day-only"}),
        ("priced_requests", {"k": 0, "requests": [("equal", None, 0)]}),
        ("watcher_visit", {"ahead": 0}),
    ],
    # A request counted in the stored day of the old BUDGET_TIME_ZONE (New York's, ending 14 hours after Tokyo's
    # day) was settled with the new zone's bounds, and adjust.lua took that day for a later period's: the
    # difference above the estimate was dropped (the day held 0.02 where 0.030001 was spent). Found by seed 21.
    # Not a product bug: an allowance ending after its day reports that day's 90 %, which the model's bound
    # compared with the new day's spend (0). Found by seed 31.
    "allowance_ending_after_its_period": [
        ("first_thresholds", {"percents": (10, 90)}),
        ("change_plan", {"slug": "busy"}),
        ("priced_requests", {"k": 0, "requests": [("equal", 40000, 0), ("equal", 40000, 0), ("equal", None, 0)]}),
        ("move_time", {"to": "month"}),
        ("allowances_end", {}),
    ],
    # An allowance's grant that crossed 80 % of a day reported its alert with the spend less the reservation's units
    # once more: 0.06 of 0.10 where 0.08 was committed (decide.lua reports committed spend, the reservation apart;
    # the allowance took its later requests' units off again). Found by a seeded draw (300x10, seed 31), through a
    # GraphQL batch of 7 and a stream; any requests to 0.07 then one at the price show it.
    "grant_alert_with_the_committed_spend": [
        ("first_plan", {"slug": "busy"}),
        ("priced_requests", {"k": 0, "requests": [("equal", 40000, 0), ("equal", 30000, 0)]}),
        ("priced_requests", {"k": 0, "requests": [("equal", None, 0)]}),
    ],
    "settlement_in_the_decisions_period": [
        ("change_time_zone", {"tz": "America/New_York"}),
        ("priced_requests", {"k": 0, "requests": [("equal", None, 0)]}),
        ("change_time_zone", {"tz": "Asia/Tokyo"}),
        ("priced_requests", {"k": 0, "requests": [("above", None, 50)]}),
    ],
    # The billing review's findings that a draw of make test's size does not reach when their fix is undone
    # (docs/concepts.md, "What the machine catches"); each of these fails on both stores with its fix undone.
    # A rolled key's successor started its own cap's counters from 0 (the key's counters named by its own id).
    "key_roll_keeps_the_counters": [
        ("set_key_cap", {"k": 0, "period": "day", "amount": 10000}),
        ("priced_requests", {"k": 0, "requests": [("equal", None, 0)]}),
        ("roll_key", {"k": 0, "overlap": 0}),
    ],
    # A cap shared its budget's stored alert level: with the cap removed, the budget's own 80 % never came.
    "alert_levels_per_limit": [
        ("set_cap", {"period": "day", "amount": 30000}),
        ("priced_requests", {"k": 0, "requests": [("equal", None, 0)] * 3}),
        ("set_cap", {"period": "day", "amount": None}),
        ("priced_requests", {"k": 0, "requests": [("equal", 20000, 0)] * 3}),
    ],
    # Units an allowance reserved raised the alert level they never reached (80 % sent below 80 %).
    "reservation_raises_no_alert": [
        ("change_plan", {"slug": "busy"}),
        ("priced_requests", {"k": 0, "requests": [("equal", None, 0)] * 3}),
        ("priced_requests", {"k": 0, "requests": [("equal", None, 0)] * 3}),
    ],
    # A customer's threshold was reported again after BUDGET_TIME_ZONE moved west (the period named by its start
    # in the new zone, while the spend carried over).
    "threshold_once_after_a_move_west": [
        ("first_thresholds", {"percents": (10, 90)}),
        ("move_time", {"to": "day-1"}),
        ("priced_requests", {"k": 0, "requests": [("equal", None, 0)]}),
        ("change_time_zone", {"tz": "America/New_York"}),
        ("watcher_visit", {"ahead": 0}),
    ],
    # Two keys' caps reaching a threshold made one budget.threshold_crossed event (named by the cap's name, not
    # the key), with currency "" (f). Caught by the Redis draw (a key cap of 0, its refusal's 100 %); not memory's.
    "key_cap_events_name_the_key": [
        ("set_key_cap", {"k": 0, "period": "day", "amount": 10000}),
        ("new_key", {}),
        ("set_key_cap", {"k": 1, "period": "day", "amount": 10000}),
        ("priced_requests", {"k": 0, "requests": [("equal", None, 0)]}),
        ("priced_requests", {"k": 1, "requests": [("equal", None, 0)]}),
    ],
    # The watcher named the period by its host's clock: a look with the host past midnight and the ledger not
    # filed the old day's 10 % under the new day (e: an event the model does not record), and the new day's own
    # 10 % was then never recorded.
    "watcher_names_the_ledgers_period": [
        ("first_thresholds", {"percents": (10, 90)}),
        ("move_time", {"to": "day-1"}),
        ("priced_requests", {"k": 0, "requests": [("equal", None, 0)]}),
        ("watcher_visit", {"ahead": 5}),
        ("move_time", {"to": 60}),
        ("priced_requests", {"k": 0, "requests": [("equal", None, 0)]}),
    ],
    # A request a later throttle class (the tenant's) refused was charged its price: 0.01 in the budget and the
    # billed usage for a 429 (the memory store's draw caught it; not Redis's).
    "refused_by_a_later_class": [
        ("tenant_requests", {"k": 0, "neighbour": 6, "requests": [("equal", None, 0)]}),
    ],
    # A request a later throttle class refused was withdrawn, but the period quota's alert level its admission
    # raised stayed: its 80 % was never sent (withdrawn), nor was the real 80 % that followed (both stores).
    "withdrawal_takes_back_its_quota_level": [
        ("priced_requests", {"k": 0, "requests": [("equal", None, 0)] * 3}),
        ("priced_requests", {"k": 0, "requests": [("equal", None, 0)]}),
        ("tenant_requests", {"k": 0, "neighbour": 6, "requests": [("equal", None, 0)]}),
        ("priced_requests", {"k": 0, "requests": [("equal", None, 0)]}),
    ],
    # After BUDGET_TIME_ZONE moved east, a period quota's state still named by the old zone's later end gave no
    # unit back on withdrawal (refund.lua read it without decide's carry-over): a refused request counted.
    "withdrawal_in_a_carried_period": [
        ("priced_requests", {"k": 0, "requests": [("equal", None, 0)]}),
        ("change_time_zone", {"tz": "Asia/Tokyo"}),
        ("tenant_requests", {"k": 0, "neighbour": 6, "requests": [("equal", None, 0)]}),
    ],
    # Budget spend owed when the process exited with Redis away was dropped: the day budget held the estimate,
    # 0.01, where 0.02 was spent (Redis only: the memory store is never away).
    "owed_spend_survives_an_exit": [
        ("settle_with_a_fault", {"k": 0, "fault": "Redis error, then the process exits", "more": 1}),
    ],
    # The month's state lived until a minute after the UTC month's end, so once BUDGET_TIME_ZONE moved to New York
    # its last five hours read 0 spent where 0.01 was (period.lua's TTL; seen on the memory store, whose keys expire
    # by the injected clock; a sweep of the bucket does it on Redis).
    "state_lives_past_a_zone_move": [
        ("priced_requests", {"k": 0, "requests": [("equal", None, 0)]}),
        ("change_time_zone", {"tz": "America/New_York"}),
        ("move_time", {"to": "month-1"}),
    ],
}


#: Steps every run replays besides the draw, as the findings: what a draw of EXAMPLES examples of STEPS steps
#: rarely reaches, and a rule's checks need (each named by what it covers).
SCENARIOS = {
    # Both processes hold allowances for the same budgets (each serves a client's third request like its second),
    # each one's requests costing above their estimate, then every allowance ends: spend and billed usage exact
    # again, the alerts their spend reached sent once. (150 examples per store reached allowances in the other
    # process four times, and their end after them never.)
    "allowances_in_two_processes": [
        ("first_plan", {"slug": "busy"}),
        ("first_thresholds", {"percents": (10, 90)}),
        ("priced_requests", {"k": 0, "requests": [("equal", None, 0), ("equal", None, 0), ("below", None, 40)]}),
        (
            "elsewhere_requests",
            {"k": 0, "est": None, "requests": [("equal", 0), ("equal", 0), ("below", 70)], "end": False},
        ),
        (
            "elsewhere_requests",
            {"k": 0, "est": None, "requests": [("equal", 0), ("equal", 0), ("above", 60)], "end": False},
        ),
        ("priced_requests", {"k": 0, "requests": [("equal", None, 0), ("above", None, 30)]}),
        ("allowances_end", {}),
        ("elsewhere_requests", {"k": 0, "est": 40000, "requests": [("equal", 0)] * 3, "end": True}),
    ],
}


#: Findings whose steps are the fault rules' (through the proxy): Redis only.
REDIS_ONLY = {"owed_spend_survives_an_exit"}


#: Each finding and scenario on each store, but those of REDIS_ONLY on the memory store, which is never away.
REPLAYS = [
    pytest.param(store.values[0], finding, id=f"{store.id}-{finding}", marks=store.marks)
    for finding in sorted(FINDINGS) + sorted(SCENARIOS)
    for store in STORES
    if not (store.values[0] == "memory" and finding in REDIS_ONLY)
]


@pytest.mark.parametrize(("store", "finding"), REPLAYS)
def test_the_machine_replays_its_findings(store: str, finding: str, world: World) -> None:
    """Each finding's steps (and each scenario's), with the invariants after each, as the machine runs them: the
    check that caught it passes now."""
    machine = MoneyMachine()
    try:
        for step, arguments in {**FINDINGS, **SCENARIOS}[finding]:
            getattr(machine, step)(**arguments)
            machine.spend_is_the_models()
            machine.events_are_the_alerts()
            machine.billed_usage_is_the_actual_costs()
    finally:
        machine.teardown()
