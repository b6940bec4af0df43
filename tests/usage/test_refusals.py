"""Each client's last refusals: noted off the request path, written by the poller's tick, read by operators."""

from __future__ import annotations

import dataclasses
import json
import time
from collections import Counter

import pytest
from prometheus_client import REGISTRY

from plans.models import ACLEntry, APIKey
from quotas.contract.keys import refusals_key
from quotas.engine import default_engine
from quotas.formats.rates import parse_rates
from quotas.identity.clients import hash_api_key
from quotas.observability.record import labels
from quotas.observability.refusals import KEEP_PER_CLIENT, TTL_SECONDS, RefusalLog, read_refusals
from quotas.rules.limits import LimitRule
from quotas.rules.snapshot import ban_policy_spec
from quotas.store.refusal_lists import RefusalLists
from tests.factories import UserFactory, issue_key
from tests.quotas.test_adaptive_engine import publish
from tests.store_client import client_of
from tests.unreachable import unreachable_redis

from .conftest import send
from .test_api import problem

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]

REFUSALS = "/api/v1/usage/refusals"


def tag_of(raw_key: str) -> str:
    return f"s.{APIKey.objects.get(key_hash=hash_api_key(raw_key)).subscription_id}"


class Catching(RefusalLog):
    """A refusal log that also keeps the last decision it was given."""

    def note(self, client_tag, decision, plan, scope, reason):
        self.caught = (client_tag, decision)
        super().note(client_tag, decision, plan, scope, reason)


def refused_decision(api, key: str):
    """(tag, decision) of a real refusal of ``key``'s client, decided in Redis (its 6th request of the minute)."""
    runtime = default_engine.runtime()
    send(api, key, 5)
    runtime.guard.deny_memory.clear()  # decide in Redis, not from process memory
    log, runtime.refusals = runtime.refusals, Catching()
    try:
        assert send(api, key, 1) == {429: 1}
        return runtime.refusals.caught
    finally:
        runtime.refusals = log


@pytest.mark.redis
def test_a_refusal_is_stored_with_its_limit_window_remaining_and_reset(api, free, redis_client):
    """The 6th request of a 5/min plan is refused; after a tick the client's list holds that refusal."""
    key = issue_key(plan=free)
    assert send(api, key, 6) == {200: 5, 429: 1}
    runtime = default_engine.runtime()
    runtime.tick()
    [record] = read_refusals(RefusalLists(redis_client, runtime.prefix), tag_of(key))
    assert (record["reason"], record["plan"], record["scope"]) == ("rate", "free", "")
    [window] = record["windows"]
    assert (window["limit"], window["window"], window["remaining"]) == (5, 60, 0)
    assert 0 < window["reset"] <= 60
    assert 0 < window["retry_after"] <= 60
    assert record["retry_after"] == pytest.approx(window["retry_after"], abs=1)
    assert abs(record["at"] - time.time()) < 5
    assert record["time"].endswith("+00:00")
    assert 0 < redis_client.ttl(refusals_key(runtime.prefix, tag_of(key))) <= TTL_SECONDS


def test_only_the_last_twenty_are_kept(api, free, redis_client):
    """Thirty refusals a second apart, written over several ticks: the newest twenty are kept, newest first."""
    key = issue_key(plan=free)
    tag, decision = refused_decision(api, key)
    log = RefusalLog()
    for i in range(30):
        log.note(tag, dataclasses.replace(decision, now=decision.now + i), "free", "", "rate")
        if i % 7 == 0:
            assert log.write(RefusalLists(redis_client, "t"))
    assert log.write(RefusalLists(redis_client, "t"))
    stored = read_refusals(RefusalLists(redis_client, "t"), tag)
    assert len(stored) == KEEP_PER_CLIENT
    assert [r["at"] for r in stored] == [round(decision.now + i, 3) for i in range(29, 9, -1)]
    assert 86_000 < redis_client.ttl(refusals_key("t", tag)) <= TTL_SECONDS


def test_a_flood_leaves_at_most_one_record_per_client_per_second(api, free, redis_client):
    """200 refused requests, mostly answered from process memory, leave one record per second they spanned."""
    key = issue_key(plan=free)
    runtime = default_engine.runtime()
    capped_before = lost("capped")
    started = time.time()
    codes = send(api, key, 205)
    ended = time.time()
    assert codes == {200: 5, 429: 200}
    runtime.tick()
    stored = read_refusals(RefusalLists(redis_client, runtime.prefix), tag_of(key))
    seconds = int(ended) - int(started) + 1
    assert 1 <= len(stored) <= min(seconds + 1, KEEP_PER_CLIENT)  # +1: Redis's clock and this one's
    assert len({int(r["at"]) for r in stored}) == len(stored)
    assert runtime.refusals.capped >= 200 - len(stored)
    assert lost("capped") - capped_before == runtime.refusals.capped  # exported for operators
    assert all(r["windows"][0]["remaining"] == 0 for r in stored)  # as Redis said, also when from process memory
    assert [r.get("local", False) for r in stored][-1] is False  # the first, decided in Redis


def test_records_a_write_failed_to_store_are_kept_for_the_next_tick(api, free, redis_client):
    """Redis refusing the connection: the records stay (within the bound), the error is counted, the next
    write stores them."""
    dead = unreachable_redis()
    tag, decision = refused_decision(api, issue_key(plan=free))
    log = RefusalLog(size=3)
    for client in ("{u.901}", "{u.902}", tag):
        log.note(client, decision, "free", "", "rate")
    before = redis_errors()
    assert log.write(RefusalLists(dead, "t")) is False
    assert redis_errors() == before + 1
    assert len(log) == 3
    dropped_before = lost("dropped")
    log.note("{u.904}", decision, "free", "", "rate")  # past the bound: the oldest goes
    assert (len(log), log.dropped) == (3, 1)
    assert lost("dropped") == dropped_before + 1
    lists = RefusalLists(redis_client, "t")
    assert log.write(lists) is True
    assert [len(read_refusals(lists, c)) for c in ("u.901", "u.902", tag, "u.904")] == [0, 1, 1, 1]


def test_rotating_anonymous_addresses_store_at_most_the_cap_of_lists(api, free, set_quotas, quota_clock):
    """Twelve anonymous clients, each from a /64 of its own (a rotating IPv6 attacker), are refused: only the
    first three (the cap) get a list in Redis, the others are counted as lost; a subscriber refused after
    them is still recorded."""
    set_quotas(REFUSALS_ANONYMOUS_PER_HOUR=3)  # the clock stands still: one hour of the cap for the whole test
    runtime = default_engine.runtime()
    redis_client = client_of(runtime)
    before = lost("anonymous_cap")
    for n in range(12):
        address = f"2001:db8:{n:x}:1::1"
        codes = Counter(api.get("/api/demo/ping", REMOTE_ADDR=address).status_code for _ in range(6))
        assert codes == {200: 5, 429: 1}
    key = issue_key(plan=free)
    assert send(api, key, 6) == {200: 5, 429: 1}
    runtime.tick()
    stored = sorted(k.decode() for k in redis_client.scan_iter(match=f"{runtime.prefix}:why:*"))
    anonymous = [k for k in stored if ":why:{ip." in k]
    assert len(anonymous) == 3
    assert refusals_key(runtime.prefix, tag_of(key)) in stored
    assert lost("anonymous_cap") - before == 9
    assert runtime.refusals.anonymous_capped == 9
    assert len(read_refusals(RefusalLists(redis_client, runtime.prefix), tag_of(key))) == 1


def test_an_anonymous_client_already_recorded_this_hour_keeps_being_recorded(api, free, redis_client, set_quotas):
    """The cap counts clients, not records: a recorded client's later refusals are kept, a new hour starts
    afresh (by the decision's clock), and 0 records no anonymous client at all."""
    set_quotas(REFUSALS_ANONYMOUS_PER_HOUR=1)
    _, decision = refused_decision(api, issue_key(plan=free))
    hour = (int(decision.now) // 3600 + 1) * 3600  # the start of the next hour
    log = RefusalLog()
    for i, client in enumerate(["{ip.192.0.2.1}", "{ip.192.0.2.2}", "{ip.192.0.2.1}", "{u.5}", "{u.6}"]):
        log.note(client, dataclasses.replace(decision, now=hour + i), "free", "", "rate")
    log.note("{ip.192.0.2.2}", dataclasses.replace(decision, now=hour + 3600), "free", "", "rate")
    assert log.anonymous_capped == 1
    assert log.write(RefusalLists(redis_client, "t"))
    counts = [
        len(read_refusals(RefusalLists(redis_client, "t"), c)) for c in ("ip.192.0.2.1", "ip.192.0.2.2", "u.5", "u.6")
    ]
    assert counts == [2, 1, 1, 1]
    set_quotas(REFUSALS_ANONYMOUS_PER_HOUR=0)
    log = RefusalLog()
    log.note("{ip.192.0.2.3}", decision, "free", "", "rate")
    assert (len(log), log.anonymous_capped) == (0, 1)


def lost(reason: str) -> float:
    return REGISTRY.get_sample_value("quota_refusal_records_lost_total", {"reason": reason}) or 0.0


def redis_errors() -> float:
    return REGISTRY.get_sample_value("quota_redis_errors_total", {"operation": "refusals"}) or 0.0


def test_an_access_list_denial_is_recorded_with_its_entry(api, free, quota_clock):
    """A deny-list entry refuses with 403: the record names the entry, and no window."""
    key = issue_key(plan=free)
    sub = APIKey.objects.get(key_hash=hash_api_key(key)).subscription
    entry = ACLEntry.objects.create(action="deny", subscription=sub, reason="abuse")
    default_engine.runtime().rules.invalidate()
    assert send(api, key, 3) == {403: 3}
    default_engine.runtime().tick()
    [record] = read_refusals(default_engine.runtime().store.refusals, tag_of(key))
    assert (record["reason"], record["acl_entry"]) == ("acl", entry.pk)
    assert "windows" not in record


# The API.


def test_staff_read_any_clients_refusals_newest_first(api, free, staff):
    key = issue_key(plan=free)
    send(api, key, 6)
    default_engine.runtime().tick()
    body = api.get(REFUSALS, {"client": tag_of(key)}).json()
    assert body["client"] == tag_of(key)
    [record] = body["refusals"]
    assert record["windows"][0]["remaining"] == 0


def test_a_capacity_refusal_says_nothing_remains_never_a_negative_count(api, free, staff, redis_client):
    """4 of a 5/min limit used, then a multiplier of 0.6 cuts it to 3: the 5th request is refused for capacity
    (503). Its record says remaining 0, not 3 - 4 = -1: a refusal's remaining is never negative."""
    key = issue_key(plan=free)
    assert send(api, key, 4) == {200: 4}
    publish(redis_client, {str(free.pk): 0.6})
    assert send(api, key, 1) == {503: 1}
    default_engine.runtime().tick()
    [record] = api.get(REFUSALS, {"client": tag_of(key)}).json()["refusals"]
    assert record["reason"] == "capacity"
    [window] = record["windows"]
    assert (window["limit"], window["remaining"]) == (3, 0)


@pytest.mark.parametrize("asked", [None, "", "nope", "s.12}", "{s.1", "s." + "x" * 65, "S.1"])
def test_a_missing_or_malformed_client_is_a_400(api, staff, asked):
    params = {} if asked is None else {"client": asked}
    body = problem(api.get(REFUSALS, params), 400)
    assert "client" in body["errors"]


def test_a_key_client_reads_its_own_refusals_only(api, free):
    key = issue_key(plan=free)
    other = issue_key(plan=free)
    send(api, key, 6)
    default_engine.runtime().tick()
    response = api.get(REFUSALS, {"client": tag_of(key)}, HTTP_X_API_KEY=key)
    assert response.status_code == 200
    assert len(response.json()["refusals"]) == 1
    problem(api.get(REFUSALS, {"client": tag_of(other)}, HTTP_X_API_KEY=key), 403)


def test_staff_without_the_permission_and_anonymous_callers_are_refused(api, free):
    key = issue_key(plan=free)
    problem(api.get(REFUSALS, {"client": tag_of(key)}), 401)
    api.force_authenticate(UserFactory(username="plain-staff", is_staff=True))
    problem(api.get(REFUSALS, {"client": tag_of(key)}), 403)
    assert json.loads(api.get(REFUSALS, {"client": "s.1"}).content)["status"] == 403


def test_a_ban_is_recorded_with_its_end(runtime, redis_client):
    """The refusal that starts a ban, and one refused during it, record when the ban ends."""
    policy, at = ban_policy_spec(3, 10, (60, 600)), 1_700_000_040.0
    rule = LimitRule(id="l", name="l", rates=parse_rates("1/min"), algorithm="fixed_window")
    log = RefusalLog()
    for i in range(6):  # allowed, 3 refusals, the one starting the ban, one during it (a second apart)
        decision = runtime.guard.decide("{u.7}", rule.windows, now=at + i, ban_policy=policy)
        if not decision.allowed:
            log.note("{u.7}", decision, None, "", labels(decision)[1])
    assert log.write(RefusalLists(redis_client, "t"))
    during, started, *rate = read_refusals(RefusalLists(redis_client, "t"), "u.7")
    assert [r["reason"] for r in (during, started, *rate)] == ["banned", "banned", "rate", "rate", "rate"]
    assert started["ban_until"] == during["ban_until"] == at + 4 + 60
    assert during["windows"] == []  # a ban reads no limit
    assert rate[0]["windows"][0]["remaining"] == 0
