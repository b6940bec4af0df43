"""Operators list and lift failed-authentication blocks with ``manage.py quota_auth_blocks``, over real Redis."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.contrib.auth.models import Permission
from django.core.management import CommandError, call_command
from django.test import Client
from rest_framework.test import APIClient

from tests.factories import EndpointLimitFactory, PlanFactory, UserFactory

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]


@pytest.fixture
def tight(settings, db):
    plan = PlanFactory(slug="free", is_default=True)
    EndpointLimitFactory(plan=plan, name="global", rates="1000/min")
    settings.QUOTAS = {
        **settings.QUOTAS,
        "FAILED_AUTH_LIMITS": {"address": "3/10min", "username": "2/10min", "device": "2/10min"},
    }


def run(*args: str) -> str:
    out = StringIO()
    call_command("quota_auth_blocks", *args, stdout=out)
    return out.getvalue()


def guess_keys(address: str, n: int = 4) -> list[int]:
    api = APIClient()
    return [
        api.get("/api/demo/ping", HTTP_X_API_KEY=f"qk_guess_{i}", REMOTE_ADDR=address).status_code for i in range(n)
    ]


def test_blocks_are_listed_then_an_address_is_lifted_and_the_next_guess_is_answered_401(tight):
    assert guess_keys("203.0.113.90") == [401, 401, 401, 429]
    UserFactory(username="alice", password="right-password-1")
    for _ in range(2):
        Client(REMOTE_ADDR="198.51.100.90").post("/admin/login/", {"username": "alice", "password": "nope"})
    rows = json.loads(run("--json"))
    by_kind = {r["kind"]: r for r in rows}
    assert by_kind["address"]["tag"] == "af.203.0.113.90"
    assert (by_kind["address"]["failures"], by_kind["address"]["limit"], by_kind["address"]["blocked"]) == (3, 3, True)
    assert by_kind["username"]["blocked"]
    assert 0 < by_kind["username"]["seconds_left"] <= 600
    assert "af.203.0.113.90" in run()

    assert run("--lift", "address", "203.0.113.90") == "Lifted {af.203.0.113.90}.\n"
    assert guess_keys("203.0.113.90", 1) == [401]  # counting starts afresh, in this process too
    assert [r["kind"] for r in json.loads(run("--json"))] == ["username"]


def test_a_username_is_lifted_by_name_and_signs_in_again(tight):
    UserFactory(username="alice", password="right-password-1", is_staff=True)
    for _ in range(3):
        Client(REMOTE_ADDR="198.51.100.91").post("/admin/login/", {"username": "alice", "password": "nope"})
    browser = Client(REMOTE_ADDR="198.51.100.92")
    assert browser.post("/admin/login/", {"username": "alice", "password": "right-password-1"}).status_code == 429
    run("--lift", "username", "Alice ")  # as the username is compared: trimmed, case-folded
    assert browser.post("/admin/login/", {"username": "alice", "password": "right-password-1"}).status_code == 302


def test_the_list_is_empty_without_blocks_and_all_shows_counts(tight):
    assert run() == "No client is blocked for failed authentications.\n"
    guess_keys("203.0.113.93", 1)
    assert run("--json") == "[]\n"
    assert json.loads(run("--all", "--json"))[0]["failures"] == 1


def test_bad_arguments_are_clear_errors(tight):
    with pytest.raises(CommandError, match="not an IP address"):
        run("--lift", "address", "nowhere")
    with pytest.raises(CommandError, match="not one of"):
        run("--lift", "planet", "mars")
    with pytest.raises(CommandError, match="not a failed-authentication tag"):
        run("--lift-tag", "s.12")


def test_redis_down_is_a_command_error(tight, redis_server):
    redis_server.stop()
    try:
        with pytest.raises(CommandError, match="Redis is unreachable"):
            run()
    finally:
        redis_server.start()


def test_the_users_admin_lifts_sign_in_blocks_for_who_may_change_users(tight):
    alice = UserFactory(username="alice", password="right-password-1", is_staff=True)
    for _ in range(3):
        Client(REMOTE_ADDR="198.51.100.95").post("/admin/login/", {"username": "alice", "password": "nope"})
    action = {"action": "lift_sign_in_blocks", "_selected_action": [alice.pk]}

    viewer = UserFactory(username="viewer", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_user"))
    as_viewer = Client()
    as_viewer.force_login(viewer)
    as_viewer.post("/admin/auth/user/", action)
    assert "username" in [r["kind"] for r in json.loads(run("--json"))]  # a viewer's POST lifts nothing

    admin = UserFactory(username="boss", is_staff=True, is_superuser=True)
    as_admin = Client()
    as_admin.force_login(admin)
    page = as_admin.post("/admin/auth/user/", action, follow=True)
    assert "Lifted the sign-in blocks of 1 user(s)." in page.content.decode()
    assert "username" not in [r["kind"] for r in json.loads(run("--json"))]
    browser = Client(REMOTE_ADDR="198.51.100.96")
    assert browser.post("/admin/login/", {"username": "alice", "password": "right-password-1"}).status_code == 302
