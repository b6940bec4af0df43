"""The dispatcher is fair between subscriptions: which due deliveries a run claims (round robin across
subscriptions, then across each one's endpoints and contacts), which lanes get the threads (no subscription
more than SHARE at once), and how soon another subscription's webhook leaves while one subscription's slow
endpoints keep a run busy (within beat's interval plus one TIMEOUT of being recorded; it was 10 s and more)."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest
from django.utils import timezone

from notifications.claims import DEPTH, claim, fair_lanes
from notifications.dispatch import BATCH
from notifications.lanes import CONCURRENCY, SHARE, FairQueue, Job, Outcome
from notifications.models import Delivery, Event
from tests.factories import SubscriptionFactory
from tests.slow_server import slow_server

from .fairness import backlog, due_in, endpoints, notifier, one_event

#: Beat's interval for notifications.dispatch (config/settings.py), and the receivers' deadline in the slow test.
INTERVAL, TIMEOUT = 5.0, 1.0


def job(group: str, lane: str, n: int = 0) -> Job:
    return Job(n, lane, "{}", "event", "client.banned", url="https://example.com/", group=group)


def test_a_group_takes_at_most_its_share_of_the_threads_and_a_newcomer_goes_first():
    """10 lanes of A queued before one of B: of the 8 threads A gets SHARE (4) and B one at once, though B came
    last; A's next lane starts only when one of A's ends, and A's lanes take turns."""
    queue = FairQueue()
    for n in range(10):
        queue.add(job("A", f"a{n}", n))
    queue.add(job("B", "b0", 99))
    started = [queue.take() for _ in range(CONCURRENCY)]
    taken = [j for j in started if j is not None]
    assert [j.lane for j in taken] == ["a0", "b0", "a1", "a2", "a3"]
    assert SHARE == 4
    queue.done(Outcome(taken[0], attempted=True, ok=True))
    assert queue.take().lane == "a4"
    assert queue.take() is None


def test_the_least_served_group_goes_first_and_lanes_take_turns():
    """Two jobs each on A's two lanes and one on B's: A, B, then A's other lane (not a second job of a0)."""
    queue = FairQueue(share=8)
    for n, lane in enumerate(["a0", "a0", "a1", "a1"]):
        queue.add(job("A", lane, n))
    queue.add(job("B", "b0", 9))
    first, second, third = queue.take(), queue.take(), queue.take()
    assert [first.lane, second.lane, third.lane] == ["a0", "b0", "a1"]
    assert queue.take() is None  # both of A's lanes are sending: one request per endpoint at a time
    queue.done(Outcome(first, attempted=True, ok=True))
    assert queue.take().delivery_id == 1


def test_a_failure_closes_its_lane_for_the_run():
    """A lane's failure returns its waiting jobs (unattempted) and refuses it any more."""
    queue = FairQueue()
    for n in range(3):
        queue.add(job("A", "a0", n))
    failed = queue.take()
    assert [j.delivery_id for j in queue.done(Outcome(failed, attempted=True, failure="timeout"))] == [1, 2]
    assert len(queue) == 0
    assert not queue.add(job("A", "a0", 3))
    assert queue.lanes() == {"a0"}


@pytest.mark.django_db
def test_a_claim_serves_every_subscription_before_a_backlog(settings):
    """A's 10 endpoints have 15 old deliveries each (150); B one new one; an event of a deleted subscription
    one: a claim of BATCH takes B's and the orphan's (a group of its own), at most SHARE of A's endpoints, and
    DEPTH of each; what it claimed is leased, and a second claim takes none of it."""
    a, b, gone = SubscriptionFactory(), SubscriptionFactory(), SubscriptionFactory()
    now = timezone.now()
    endpoints(a, "https://a.example/hook", 10)
    (b_endpoint,) = endpoints(b, "https://b.example/hook", 1)
    (gone_endpoint,) = endpoints(gone, "https://gone.example/hook", 1)
    backlog(a, 15, now - timedelta(minutes=5))
    one_event(b, now)
    one_event(gone, now - timedelta(seconds=1))
    Event.objects.filter(subscription=gone).update(subscription=None)  # its deliveries outlive it (SET_NULL)
    lease = now + timedelta(minutes=2)
    lanes = fair_lanes(now, skip=set(), held={})
    assert [group for group, _ in lanes].count(f"subscription:{a.pk}") == SHARE
    assert ("subscription:None", f"endpoint:{gone_endpoint.pk}") in lanes
    claimed = claim(now, lease, lanes, BATCH)
    by_endpoint = {d.endpoint_id: 0 for d in claimed}
    for delivery in claimed:
        by_endpoint[delivery.endpoint_id] += 1
    assert by_endpoint.pop(b_endpoint.pk) == 1
    assert by_endpoint.pop(gone_endpoint.pk) == 1
    assert sorted(by_endpoint.values()) == [DEPTH] * SHARE
    assert Delivery.objects.filter(next_attempt_at=lease).count() == len(claimed)
    again = claim(now, lease, fair_lanes(now, skip=set(), held={}), BATCH)
    assert not {d.pk for d in again} & {d.pk for d in claimed}


@pytest.mark.django_db
def test_a_claim_takes_turns_between_the_endpoints_of_one_subscription():
    """One endpoint of A with 30 old deliveries, another with one new one: the new one is claimed with the
    first, not after the other's backlog; a lane the run holds already (skip) is not looked at."""
    a = SubscriptionFactory()
    now = timezone.now()
    busy, quiet = endpoints(a, "https://a.example/hook", 2)
    quiet.is_active = False
    quiet.save()
    backlog(a, 30, now - timedelta(minutes=5))
    quiet.is_active = True
    quiet.save()
    one_event(a, now)
    lanes = fair_lanes(now, skip=set(), held={})
    assert [lane for _, lane in lanes] == [f"endpoint:{busy.pk}", f"endpoint:{quiet.pk}"]
    claimed = claim(now, now + timedelta(minutes=2), lanes, room=2)
    assert [d.endpoint_id for d in claimed] == [busy.pk, quiet.pk]
    assert fair_lanes(now, skip={f"endpoint:{busy.pk}"}, held={}) == []  # the quiet one's only one is claimed


@pytest.mark.slow
@pytest.mark.django_db
def test_another_subscriptions_webhook_leaves_within_the_interval_and_one_timeout(receiver, set_quotas):
    """A has 10 endpoints on a receiver that trickles its answer (each attempt ends at TIMEOUT, 1 s) and 11
    events' deliveries to each (110); B's client.banned is recorded 0.5 s into the first run. Run as beat and a
    concurrency-1 notifier run the dispatcher, B's webhook arrives within INTERVAL + TIMEOUT (+1 s margin) of
    being recorded: at once, on the run's next look, not behind A's backlog (it took about 10 s: two runs of
    A's oldest first, then its lane behind A's 10); A never had more than SHARE requests in flight, and each of
    its endpoints was tried in that run."""
    set_quotas(NOTIFICATIONS={"ALLOW_PRIVATE_ADDRESSES": True, "ALLOW_HTTP": True, "TIMEOUT": TIMEOUT})
    a, b = SubscriptionFactory(), SubscriptionFactory()
    with slow_server(interval=0.1) as slow:
        endpoints(a, slow.url, 10)
        endpoints(b, receiver.url, 1)
        backlog(a, 11, timezone.now() - timedelta(seconds=1))
        recorded = due_in(0.5)
        one_event(b, recorded)
        runs = notifier(lambda: bool(receiver.requests), INTERVAL, give_up_after=14)
        arrivals = [got.arrived for got in receiver.requests]
        waited = arrivals[0] - recorded.timestamp() if arrivals else math.inf
        starts = sorted(exchange.arrived for exchange in slow.exchanges)
    print(f"B's webhook waited {waited:.2f} s; runs {[(round(s, 2), round(e, 2)) for s, e in runs.spans]}")
    assert waited <= INTERVAL + TIMEOUT + 1.0, (waited, runs.spans)
    # Each of A's attempts lasts its whole deadline, so a thread sends A's requests at least TIMEOUT apart: more
    # than SHARE starting within less than that would be more than SHARE of A's sending at once.
    assert len(starts) == 10  # each of A's endpoints tried once in the run (its failure closes its lane)
    assert max(sum(1 for t in starts if first <= t < first + 0.9 * TIMEOUT) for first in starts) == SHARE
