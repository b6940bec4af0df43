"""Operators read and reset one client with ``manage.py quota_status`` and ``quota_reset``, over real Redis."""

from __future__ import annotations

import json
import math
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from config.embedded_redis import free_port
from quotas.contract.keys import client_tag, rules_version_key
from quotas.engine import default_engine
from quotas.store.redis_store import glob_escape
from tests.factories import EndpointLimitFactory, PlanFactory, SubscriptionFactory, UserFactory, issue_key
from tests.store_client import client_of

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]

ADDRESS = "203.0.113.9"


@pytest.fixture
def redis_client(quota_clock):
    """The engine's store: the tests' memory store, whose clock stands still (quota_clock), so that a test's
    requests share one fixed window."""
    return client_of(default_engine.runtime())


@pytest.fixture
def free(db, redis_client):
    """The default plan: 5 requests a minute (fixed window), so that counts are exact."""
    plan = PlanFactory(slug="free", is_default=True)
    EndpointLimitFactory(plan=plan, name="global", rates="5/min", algorithm="fixed_window")
    return plan


def run(command: str, *args: str) -> str:
    out = StringIO()
    call_command(command, *args, stdout=out)
    return out.getvalue()


def status(*args: str) -> dict:
    return json.loads(run("quota_status", *args, "--json"))


def ping(n: int, address: str = ADDRESS, **headers: str) -> list[int]:
    api = APIClient()
    return [api.get("/api/demo/ping", REMOTE_ADDR=address, **headers).status_code for _ in range(n)]


def test_status_shows_used_and_remaining_after_three_requests(free):
    """3 requests against 5/min: used 3, remaining 2, on the default plan; nothing else to report."""
    assert ping(3) == [200] * 3
    report = status(f"ip.{ADDRESS}")
    assert (report["client"], report["kind"], report["plan"]) == (f"ip.{ADDRESS}", "ip", "free")
    (limit,) = report["limits"]
    assert (limit["name"], limit["algorithm"], limit["quota"]) == ("global", "fixed_window", 5)
    assert (limit["used"], limit["remaining"]) == (3, 2)
    assert 0 < limit["reset"] <= 60
    # Allowances are on (the default); 5/min is too small a limit for one (SHARE of what is left).
    assert (report["ban"], report["refusals"], report["allowances"]) == (None, [], [])
    assert status(ADDRESS) == report  # the bare address names the same client
    text = run("quota_status", ADDRESS)
    assert "Plan:    free" in text
    assert "Banned:  no" in text
    assert "Allowances held by this process: none" in text
    assert [line.split()[:5] for line in text.splitlines() if line.strip().startswith("global")] == [
        ["global", "fixed_window", "5", "3", "2"]
    ]


def test_a_status_peek_consumes_nothing(free):
    """Asking twice changes nothing: the peek is not a request."""
    ping(1)
    assert status(ADDRESS)["limits"][0]["used"] == 1
    assert status(ADDRESS)["limits"][0]["used"] == 1


def test_subscriptions_and_users_are_named_as_the_runtime_names_them(free):
    """s.12 and subscription:12 name a subscription (with its plan); a user with a subscription is counted as it;
    a user without one is u.<pk>."""
    pro = PlanFactory(slug="pro")
    EndpointLimitFactory(plan=pro, name="global", rates="100/min", algorithm="fixed_window")
    alice = UserFactory(username="alice")
    sub = SubscriptionFactory(plan=pro, user=alice)
    key = issue_key(sub)
    assert ping(2, HTTP_X_API_KEY=key) == [200, 200]
    default_engine.runtime().settle_allowances(everything=True)  # the allowance ended, its unused units given back
    by_id = status(f"s.{sub.pk}")
    assert (by_id["client"], by_id["kind"], by_id["plan"]) == (f"s.{sub.pk}", "subscription", "pro")
    assert by_id["limits"][0]["used"] == 2
    assert status(f"subscription:{sub.pk}") == by_id
    as_user = status(f"user:{alice.pk}")
    assert as_user["client"] == f"s.{sub.pk}"
    assert as_user["note"] == f"user {alice.pk} has subscription {sub.pk}: their requests count as s.{sub.pk}"
    bob = UserFactory(username="bob")
    assert (status(f"u.{bob.pk}")["client"], status(f"u.{bob.pk}")["plan"]) == (f"u.{bob.pk}", "free")
    assert status(f"user:0{bob.pk}")["client"] == f"u.{bob.pk}"


def test_an_ipv6_client_is_named_by_its_network(free):
    """Two addresses of one /64 are one client, named by either address (or the network)."""
    assert ping(2, address="2001:db8::1") == [200, 200]
    ping(1, address="2001:db8::2")
    report = status("2001:db8::ffff")
    assert report["client"] == client_tag("ip", "2001:db8::/64").strip("{}")
    assert report["limits"][0]["used"] == 3
    assert status("ip.2001:db8::/64") == report
    assert status(report["client"]) == report  # the tag as a list shows it


def a_moment_600_s_from_which_reads_more_than_600(after: float) -> float:
    """A moment after ``after`` from which a 600 s ban, stamped in whole microseconds, ends more than 600 s later
    in floating point (so that "seconds left" is computed where rounding could show 601)."""
    at = math.floor(after) + 10.0
    while (int(at * 1_000_000) + 600_000_000) / 1_000_000 - at <= 600:
        at += 0.0000137
    return at


def test_a_banned_client_shows_its_ban_and_last_refusals(free, runtime, quota_clock):
    """After a flood the client is banned: until when (600 s left, never 601), and the refusals that led there."""
    quota_clock.set(a_moment_600_s_from_which_reads_more_than_600(quota_clock.now()))
    free.ban_threshold, free.ban_window, free.ban_durations = 2, 60, "600"
    free.save()
    runtime.rules.invalidate()
    assert ping(9) == [200] * 5 + [429] * 4
    runtime.refusals.write(runtime.store.refusals)  # the poller's job, about once a second
    report = status(ADDRESS)
    assert report["ban"]["strikes"] == 1
    assert report["ban"]["seconds_left"] == 600  # the clock stands still
    assert report["ban"]["until"].endswith("+00:00")
    assert report["refusals"]
    assert report["refusals"][0]["reason"] in {"rate", "banned"}
    text = run("quota_status", ADDRESS)
    assert "Banned:  until " in text
    assert "Last refusals (newest first):" in text


def test_status_says_n_a_for_allowances_when_they_are_off(free, no_allowances):
    """With allowances off "n/a" replaces the list of what this process holds (with them on, the default, see
    the first test: none in a shell)."""
    ping(1)
    assert status(ADDRESS)["allowances"] == "n/a"
    assert "Allowances held by this process: n/a (QUOTAS['ALLOWANCES'] is off)" in run("quota_status", ADDRESS)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("planet:mars", "names no client"),
        ("s.twelve", "a subscription id is a number"),
        ("s.999999", "No subscription has id 999999"),
        ("user:abc", "is not a user's primary key"),
        ("ip.300.1.2.3", "names no client"),
    ],
)
def test_what_names_no_client_is_a_command_error(free, text, message):
    with pytest.raises(CommandError, match=message):
        run("quota_status", text)
    with pytest.raises(CommandError, match=message):
        run("quota_reset", text)


def test_reset_admits_the_next_request_and_bumps_the_rules_version(free, redis_client, runtime):
    """5/5 used and the 6th refused: after quota_reset the next request is admitted, and every process is told."""
    assert ping(6) == [200] * 5 + [429]
    version_key = rules_version_key(runtime.prefix)
    before = int(redis_client.get(version_key) or 0)
    report = json.loads(run("quota_reset", ADDRESS, "--json"))
    assert report["client"] == f"ip.{ADDRESS}"
    assert report["window"] is None
    assert report["deleted"] >= 1
    assert int(redis_client.get(version_key)) == before + 1 == int(report["rules_version"])
    assert ping(1) == [200]
    assert status(ADDRESS)["limits"][0]["used"] == 1


def test_reset_leaves_other_clients_alone(free):
    ping(2)
    ping(3, address="198.51.100.7")
    run("quota_reset", ADDRESS)
    assert status(ADDRESS)["limits"][0]["used"] == 0
    assert status("198.51.100.7")["limits"][0]["used"] == 3


def test_reset_of_one_window_leaves_the_others(free):
    """--window resets the windows of that policy name only; an unknown name is an error listing the names."""
    EndpointLimitFactory(plan=free, name="hourly", rates="50/hour", algorithm="fixed_window")
    assert ping(6) == [200] * 5 + [429]
    out = run("quota_reset", ADDRESS, "--window", "global")
    assert "Reset window 'global' of ip.203.0.113.9: 1 field(s) and key(s) deleted." in out
    used = {w["name"]: w["used"] for w in status(ADDRESS)["limits"]}
    assert used == {"global": 0, "hourly": 5}
    assert ping(1) == [200]
    with pytest.raises(CommandError, match="has no window named 'daily'; its plan's windows are: global, hourly"):
        run("quota_reset", ADDRESS, "--window", "daily")


def test_reset_removes_the_ban_and_the_own_keys_of_sliding_logs(free, redis_client, runtime):
    """A banned client with a sliding log: both go, and it is admitted again at once."""
    free.ban_threshold, free.ban_window, free.ban_durations = 1, 60, "600"
    free.save()
    EndpointLimitFactory(plan=free, name="log", rates="20/min", algorithm="sliding_window_log")
    runtime.rules.invalidate()
    assert ping(8) == [200] * 5 + [429] * 3
    assert status(ADDRESS)["ban"] is not None
    own = runtime.store.keys_of(client_tag("ip", ADDRESS)).own_base
    assert redis_client.keys(own + "*")
    run("quota_reset", ADDRESS)
    assert redis_client.keys(own + "*") == []
    assert status(ADDRESS)["ban"] is None
    assert ping(1) == [200]


def test_reset_of_a_client_without_counters_says_so(free):
    out = run("quota_reset", "198.51.100.200")
    assert "Nothing to reset for ip.198.51.100.200: Redis holds no counter of it." in out
    assert "Rules version now " in out


def test_redis_down_is_a_command_error_naming_the_url(free, set_quotas):
    """Naming the URL, never its password."""
    url = f"redis://:s3cret@127.0.0.1:{free_port()}/0"
    set_quotas(REDIS_URL=url)
    for command in ("quota_status", "quota_reset"):
        with pytest.raises(CommandError, match="is unreachable") as caught:
            run(command, ADDRESS)
        message = str(caught.value)
        assert f"redis://:***@127.0.0.1:{url.rsplit(':', 1)[1]} (standalone)" in message
        assert "s3cret" not in message


def test_a_client_prefix_is_matched_literally(redis_client):
    """glob_escape: the characters MATCH treats as wildcards match only themselves."""
    assert glob_escape("a*b?[c]\\") == "a\\*b\\?\\[c\\]\\\\"
    redis_client.hset("h", mapping={"a*b|x": 1, "aZb|x": 1, "a*b|y": 1})
    found = {f for f, _ in redis_client.hscan_iter("h", match=glob_escape("a*b|") + "*")}
    assert found == {b"a*b|x", b"a*b|y"}


def test_an_unreachable_cluster_or_a_malformed_url_is_a_command_error(free, set_quotas):
    set_quotas(REDIS_URL=f"redis+cluster://127.0.0.1:{free_port()}")
    with pytest.raises(CommandError, match=r"Redis at redis\+cluster://127.0.0.1:\d+ \(cluster \(1 node\)\) is unre"):
        run("quota_status", ADDRESS)
    set_quotas(REDIS_URL="redis+sentinel://127.0.0.1:26379")
    with pytest.raises(CommandError, match=r"QUOTAS\['REDIS_URL'\] is not usable: a redis\+sentinel:// URL needs"):
        run("quota_reset", ADDRESS)


@pytest.fixture
def metered(db) -> tuple[APIClient, str]:
    """A subscriber on a plan priced 0.01 a request on /t/priced, with a daily budget of 1.00, and its key."""
    from decimal import Decimal

    from plans.models import CostBudget

    plan = PlanFactory(slug="metered")
    EndpointLimitFactory(plan=plan, name="priced", scope="priced", rates="1000/min", price=Decimal("0.01"))
    CostBudget.objects.create(plan=plan, period="day", amount=Decimal("1.00"))
    return APIClient(), issue_key(plan=plan)


def spent(key_client: str) -> str:
    (budget,) = status(key_client)["budgets"]
    return budget["spent"]


@pytest.mark.parametrize(("flags", "after"), [((), "0.000000"), (("--keep-spending",), "0.030000")])
def test_reset_sets_budget_spending_back_unless_told_to_keep_it(metered, flags, after):
    """Three priced requests spend 0.03 of the day's budget: a reset says it zeroes that too, and with
    --keep-spending keeps it (the rate windows are reset either way)."""
    api, key = metered
    for _ in range(3):
        assert api.get("/t/priced", HTTP_X_API_KEY=key).status_code == 200
    default_engine.runtime().settle_allowances(everything=True)  # the allowance ended, its unused units given back
    who = f"s.{SubscriptionFactory._meta.model.objects.get().pk}"
    assert spent(who) == "0.030000"
    text = run("quota_reset", who, *flags)
    assert spent(who) == after
    assert [w["used"] for w in status(who)["limits"]] == [0]
    if flags:
        assert "Budget spending kept: " in text
        assert json.loads(run("quota_reset", who, "--keep-spending", "--json"))["budgets_kept"]
    else:
        assert "--keep-spending keeps it" in text
