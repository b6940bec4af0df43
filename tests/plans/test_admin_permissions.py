"""Admin actions need the permission they imply, checked by the server, not only hidden from the menu.

Each test signs in a real staff user with exactly the given permissions and
goes through the admin's HTTP pages.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.admin import site as admin_site
from django.contrib.auth.models import Permission
from django.core.exceptions import PermissionDenied, ValidationError
from django.test import Client
from django.utils import timezone

from plans.models import APIKey, ClientBan, Subscription
from tests.factories import PlanFactory, SubscriptionFactory, UserFactory, issue_key

pytestmark = pytest.mark.django_db

RAW_KEY = re.compile(r"qk_[A-Za-z0-9_-]{20,}")


def staff_with(*codenames: str) -> Client:
    user = UserFactory(is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    browser = Client()
    browser.force_login(user)
    return browser


def offered_actions(page) -> set[str]:
    return set(re.findall(r'<option value="([a-z_]+)"', page.content.decode())) - {""}


@pytest.fixture
def world():
    free, pro = PlanFactory(slug="free"), PlanFactory(slug="pro", monthly_price=49)
    sub = SubscriptionFactory(plan=free)
    raw = issue_key(sub)
    key = APIKey.objects.get(subscription=sub)
    ban = ClientBan.objects.create(client=f"s.{sub.pk}", subscription=sub, until=timezone.now() + timedelta(hours=1))
    return {"free": free, "pro": pro, "sub": sub, "raw": raw, "key": key, "ban": ban}


def test_view_only_staff_is_offered_no_action_and_posting_one_changes_nothing(world):
    """A support user who may only look cannot mint keys, move plans, revoke keys or lift bans."""
    viewer = staff_with("view_subscription", "view_apikey", "view_clientban", "view_plan")
    sub, key, ban = world["sub"], world["key"], world["ban"]
    pages = {
        "/admin/quota_plans/subscription/": {"issue_api_key", "move_to_plan"},
        "/admin/quota_plans/apikey/": {"revoke"},
        "/admin/quota_plans/clientban/": {"lift"},
    }
    for url, actions in pages.items():
        page = viewer.get(url)
        assert page.status_code == 200
        assert not offered_actions(page) & actions
    keys_before = APIKey.objects.count()
    posts = [
        ("/admin/quota_plans/subscription/", {"action": "issue_api_key", "_selected_action": [sub.pk]}),
        (
            "/admin/quota_plans/subscription/",
            {"action": "issue_api_key", "_selected_action": [sub.pk], "issue": "1", "expires": "30d"},
        ),
        ("/admin/quota_plans/subscription/", {"action": "move_to_plan", "_selected_action": [sub.pk]}),
        (
            "/admin/quota_plans/subscription/",
            {"action": "move_to_plan", "_selected_action": [sub.pk], "apply": "1", "plan": world["pro"].pk},
        ),
        ("/admin/quota_plans/apikey/", {"action": "revoke", "_selected_action": [key.pk]}),
        ("/admin/quota_plans/clientban/", {"action": "lift", "_selected_action": [ban.pk]}),
    ]
    for url, data in posts:
        response = viewer.post(url, data, follow=True)
        assert response.status_code in (200, 403)
        assert not RAW_KEY.search(response.content.decode())
    assert APIKey.objects.count() == keys_before
    assert Subscription.objects.get(pk=sub.pk).plan == world["free"]
    key.refresh_from_db()
    ban.refresh_from_db()
    assert key.revoked_at is None
    assert ban.lifted_at is None


def test_each_action_runs_for_the_permission_it_implies(world):
    sub, key, ban = world["sub"], world["key"], world["ban"]
    issuer = staff_with("view_subscription", "add_apikey")
    assert offered_actions(issuer.get("/admin/quota_plans/subscription/")) >= {"issue_api_key"}
    step = {"action": "issue_api_key", "_selected_action": [sub.pk]}
    assert 'name="expires"' in issuer.post("/admin/quota_plans/subscription/", step).content.decode()
    page = issuer.post("/admin/quota_plans/subscription/", {**step, "issue": "1", "expires": ""})
    assert RAW_KEY.search(page.content.decode())
    assert APIKey.objects.filter(subscription=sub).count() == 2

    mover = staff_with("view_subscription", "change_subscription")
    assert "issue_api_key" not in offered_actions(mover.get("/admin/quota_plans/subscription/"))
    data = {"action": "move_to_plan", "_selected_action": [sub.pk], "apply": "1", "plan": world["pro"].pk}
    assert mover.post("/admin/quota_plans/subscription/", data).status_code == 302
    assert Subscription.objects.get(pk=sub.pk).plan == world["pro"]

    revoker = staff_with("view_apikey", "change_apikey")
    revoker.post("/admin/quota_plans/apikey/", {"action": "revoke", "_selected_action": [key.pk]})
    key.refresh_from_db()
    assert key.revoked_at is not None

    lifter = staff_with("view_clientban", "change_clientban")
    lifter.post("/admin/quota_plans/clientban/", {"action": "lift", "_selected_action": [ban.pk]})
    ban.refresh_from_db()
    assert ban.lifted_at is not None


@pytest.mark.parametrize(
    ("action", "url", "target"),
    [
        ("move_to_plan", "/admin/quota_plans/subscription/", "sub"),
        ("issue_api_key", "/admin/quota_plans/subscription/", "sub"),
        ("revoke", "/admin/quota_plans/apikey/", "key"),
        ("lift", "/admin/quota_plans/clientban/", "ban"),
    ],
)
def test_each_action_checks_its_permission_itself(world, rf, action, url, target):
    """Called without Django's action filter in front (an override of get_actions, a direct call),
    an action still refuses a view-only user and changes nothing."""
    model = type(world[target])
    model_admin = admin_site.get_model_admin(model)
    request = rf.post(url, {"action": action, "issue": "1", "apply": "1", "plan": world["pro"].pk})
    request.user = UserFactory(is_staff=True)
    request.user.user_permissions.set(Permission.objects.filter(codename__startswith="view_"))
    keys_before = APIKey.objects.count()
    with pytest.raises(PermissionDenied):
        getattr(model_admin, action)(request, model.objects.filter(pk=world[target].pk))
    assert APIKey.objects.count() == keys_before
    assert Subscription.objects.get(pk=world["sub"].pk).plan == world["free"]
    assert APIKey.objects.filter(revoked_at__isnull=False).count() == 0
    assert ClientBan.objects.filter(lifted_at__isnull=False).count() == 0


def test_changing_a_subscription_does_not_reach_its_keys_without_change_apikey(world):
    """The subscription page lists its keys; without quota_plans.change_apikey its form cannot revoke or
    re-date them."""
    sub, key = world["sub"], world["key"]
    editor = staff_with("view_subscription", "change_subscription", "view_apikey")
    page = editor.get(f"/admin/quota_plans/subscription/{sub.pk}/change/")
    assert page.status_code == 200
    assert key.prefix in page.content.decode()
    assert 'name="api_keys-0-revoked_at_0"' not in page.content.decode()
    data = {
        "name": sub.name, "plan": sub.plan_id, "started_on": str(sub.started_on), "is_active": "on",
        "overrides-TOTAL_FORMS": "0", "overrides-INITIAL_FORMS": "0",
        "budgets-TOTAL_FORMS": "0", "budgets-INITIAL_FORMS": "0",
        "api_keys-TOTAL_FORMS": "1", "api_keys-INITIAL_FORMS": "1", "api_keys-0-id": key.pk,
        "api_keys-0-subscription": sub.pk, "api_keys-0-name": "renamed",
        "api_keys-0-revoked_at_0": "2030-01-01", "api_keys-0-revoked_at_1": "00:00:00",
        "api_keys-0-expires_at_0": "2030-01-01", "api_keys-0-expires_at_1": "00:00:00",
    }  # fmt: skip
    name_before = key.name
    assert editor.post(f"/admin/quota_plans/subscription/{sub.pk}/change/", data).status_code == 302
    key.refresh_from_db()
    assert (key.revoked_at, key.expires_at, key.name) == (None, None, name_before)

    # The same form from someone who may change keys does reach them (so the POST above was well formed).
    keeper = staff_with("view_subscription", "change_subscription", "view_apikey", "change_apikey")
    assert keeper.post(f"/admin/quota_plans/subscription/{sub.pk}/change/", data).status_code == 302
    key.refresh_from_db()
    assert key.revoked_at is not None
    assert key.name == "renamed"


def key_form(key: APIKey, **changes: object) -> dict[str, object]:
    """The key's change form as the admin posts it, with ``changes`` on top."""
    data: dict[str, object] = {"name": key.name, "expires_at_0": "", "expires_at_1": ""}
    data.update({"revoked_at_0": "", "revoked_at_1": ""})
    data.update(changes)
    return data


def test_who_may_change_keys_cannot_move_their_own_key_to_another_customer(world):
    """A staff member with only quota_plans.change_apikey cannot make their key authenticate as another
    customer: the subscription is shown, not offered, and a POST naming another one changes nothing."""
    mine = SubscriptionFactory(plan=world["free"], name="staff's own")
    issue_key(mine)
    key = APIKey.objects.get(subscription=mine)
    customer = world["sub"]
    editor = staff_with("view_apikey", "change_apikey")
    page = editor.get(f"/admin/quota_plans/apikey/{key.pk}/change/")
    assert page.status_code == 200
    assert 'name="subscription"' not in page.content.decode()

    response = editor.post(f"/admin/quota_plans/apikey/{key.pk}/change/", key_form(key, subscription=customer.pk))
    assert response.status_code == 302
    key.refresh_from_db()
    assert key.subscription_id == mine.pk


def test_a_key_cannot_be_moved_in_code_either(world):
    """The model refuses it too, so no form or script can move a key."""
    key = world["key"]
    key.subscription = SubscriptionFactory(plan=world["pro"])
    with pytest.raises(ValidationError, match="issued for"):
        key.full_clean()
    with pytest.raises(ValidationError, match="issued for"):
        key.save()
    assert APIKey.objects.get(pk=key.pk).subscription_id == world["sub"].pk


def test_an_expired_key_cannot_be_revived_by_clearing_its_expiry(world):
    """Expiry, once reached, is final: the key page shows it read-only, and a POST clearing it changes nothing."""
    key = world["key"]
    APIKey.objects.filter(pk=key.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    editor = staff_with("view_apikey", "change_apikey")
    page = editor.get(f"/admin/quota_plans/apikey/{key.pk}/change/")
    assert 'name="expires_at_0"' not in page.content.decode()
    assert editor.post(f"/admin/quota_plans/apikey/{key.pk}/change/", key_form(key)).status_code == 302
    key.refresh_from_db()
    assert key.is_expired


def test_nor_through_its_subscription_page(world):
    """The subscription page's key rows go through the same rule: a validation message, the key unchanged."""
    sub, key = world["sub"], world["key"]
    expired_at = timezone.now() - timedelta(minutes=1)
    APIKey.objects.filter(pk=key.pk).update(expires_at=expired_at)
    keeper = staff_with("view_subscription", "change_subscription", "view_apikey", "change_apikey")
    data = {
        "name": sub.name, "plan": sub.plan_id, "started_on": str(sub.started_on), "is_active": "on",
        "overrides-TOTAL_FORMS": "0", "overrides-INITIAL_FORMS": "0",
        "budgets-TOTAL_FORMS": "0", "budgets-INITIAL_FORMS": "0",
        "api_keys-TOTAL_FORMS": "1", "api_keys-INITIAL_FORMS": "1", "api_keys-0-id": key.pk,
        "api_keys-0-subscription": sub.pk, "api_keys-0-name": key.name,
        "api_keys-0-revoked_at_0": "", "api_keys-0-revoked_at_1": "",
        "api_keys-0-expires_at_0": "", "api_keys-0-expires_at_1": "",
    }  # fmt: skip
    page = keeper.post(f"/admin/quota_plans/subscription/{sub.pk}/change/", data)
    assert page.status_code == 200
    assert "An expired key stays expired" in page.content.decode()
    key.refresh_from_db()
    assert key.expires_at == expired_at
