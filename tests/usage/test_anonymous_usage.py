"""Anonymous clients do not grow the database without bound: their usage is stored as one aggregate.

Each anonymous client (an IPv4 address, an IPv6 /64) is limited as itself, but its usage is stored as the
client ``ip.*``: one row per usage hash, plan, scope and day while Redis may still change that hash (at most
KEY_BUCKETS rows, however many addresses), folded into one per plan, scope and day once the day is final.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from quotas.store.usage_hash_format import ANONYMOUS_CLIENT
from usage.flush import flush_usage
from usage.models import UsageRecord
from usage.retention import FINAL_AFTER_DAYS, fold_anonymous

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]

ADDRESSES = 300


@pytest.fixture
def sixteen_buckets(set_quotas):
    set_quotas(KEY_BUCKETS=16)


def one_request_from_each_of(count: int) -> None:
    api = APIClient()  # anonymous, whoever the test's own client is signed in as
    for n in range(count):
        response = api.get("/api/demo/ping", REMOTE_ADDR=f"2001:db8:{n // 256:x}:{n % 256:x}::1")
        assert response.status_code == 200


def test_300_ipv6_networks_make_at_most_one_row_per_usage_hash(free, redis_client, sixteen_buckets):
    one_request_from_each_of(ADDRESSES)
    flush_usage()
    anonymous = UsageRecord.objects.filter(client__startswith="ip.")
    assert set(anonymous.values_list("client", flat=True)) == {ANONYMOUS_CLIENT}
    assert anonymous.count() <= 16  # one per usage hash touched, not one per address
    assert sum(anonymous.values_list("allowed", flat=True)) == ADDRESSES  # nothing lost
    # Flushing again changes nothing (each row is the absolute total of its hash).
    assert flush_usage().written == 0
    assert sum(UsageRecord.objects.filter(client=ANONYMOUS_CLIENT).values_list("allowed", flat=True)) == ADDRESSES


@pytest.mark.redis
def test_more_requests_move_the_same_rows_forward(free, redis_client, sixteen_buckets):
    one_request_from_each_of(100)
    flush_usage()
    rows_before = UsageRecord.objects.filter(client=ANONYMOUS_CLIENT).count()
    one_request_from_each_of(100)  # the same addresses again
    flush_usage()
    assert UsageRecord.objects.filter(client=ANONYMOUS_CLIENT).count() == rows_before
    assert sum(UsageRecord.objects.filter(client=ANONYMOUS_CLIENT).values_list("allowed", flat=True)) == 200


def test_staff_see_the_same_totals_before_and_after_the_flush(api, staff, free, redis_client, sixteen_buckets):
    """The usage API merges Redis and the database by the same rows, so flushing moves nothing."""
    one_request_from_each_of(50)
    before = api.get("/api/v1/usage/", {"group_by": "day"}).json()["totals"]["allowed"]
    flush_usage()
    after = api.get("/api/v1/usage/", {"group_by": "day"}).json()["totals"]["allowed"]
    assert before == after == 50


def test_a_final_day_is_folded_into_one_row_per_plan_and_scope(free, redis_client, sixteen_buckets):
    one_request_from_each_of(ADDRESSES)
    flush_usage()
    rows = UsageRecord.objects.filter(client=ANONYMOUS_CLIENT)
    assert rows.count() > 1
    assert fold_anonymous() == 0  # today is not final: Redis may still change its hashes
    folded = fold_anonymous(timezone.now() + timedelta(days=FINAL_AFTER_DAYS + 1))
    assert folded == rows.count() - 1 or rows.count() == 1
    assert rows.count() == 1
    only = rows.get()
    assert (only.allowed, only.weight, only.generation) == (ADDRESSES, ADDRESSES, "")
    assert fold_anonymous(timezone.now() + timedelta(days=FINAL_AFTER_DAYS + 1)) == 0
