"""Plans from Django groups: an active subscription, else the mapped group's plan of highest priority, else the
default plan; each over HTTP through the demo API, where RateLimit-Policy names the plan's limit."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.contrib.auth.models import Group, Permission
from django.core.management import call_command
from django.test import Client

from plans.models import GroupPlan, Subscription
from plans.rules import PlansRulesBackend
from quotas.contract.keys import rules_version_key
from quotas.engine import default_engine
from quotas.runtime.rules_cache import RulesCache
from quotas.settings import quota_settings
from quotas.store.rules_version import RulesVersion
from tests.factories import EndpointLimitFactory, PlanFactory, SubscriptionFactory, UserFactory

pytestmark = pytest.mark.django_db

PING = "/api/demo/ping"
FREE, TEAM, PARTNER = '"free";q=5;w=60', '"team";q=2;w=60', '"partner";q=3;w=60'


@pytest.fixture
def plans():
    """A default plan (5/min) and two group plans: team (2/min, priority 1) and partner (3/min, priority 5)."""
    free = PlanFactory(slug="free", is_default=True)
    team = PlanFactory(slug="team", priority=1)
    partner = PlanFactory(slug="partner", priority=5)
    for plan, rates in ((free, "5/min"), (team, "2/min"), (partner, "3/min")):
        EndpointLimitFactory(plan=plan, name=plan.slug, rates=rates)
    return {"free": free, "team": team, "partner": partner}


@pytest.fixture
def groups(plans):
    """Group "team" on plan team, group "partners" on plan partner, group "newsletter" on no plan."""
    team, partners = Group.objects.create(name="team"), Group.objects.create(name="partners")
    GroupPlan.objects.create(group=team, plan=plans["team"])
    GroupPlan.objects.create(group=partners, plan=plans["partner"])
    return {"team": team, "partners": partners, "newsletter": Group.objects.create(name="newsletter")}


def signed_in(user) -> Client:
    browser = Client()
    browser.force_login(user)
    return browser


def policy(user) -> str:
    return signed_in(user).get(PING)["RateLimit-Policy"]


def status(name: str) -> dict:
    """``quota_status <name> --json``: the client the operators' command resolves, its plan and windows."""
    out = StringIO()
    call_command("quota_status", name, "--json", stdout=out)
    return json.loads(out.getvalue())


def rules_version(redis_client) -> int:
    return int(redis_client.get(rules_version_key(quota_settings.KEY_PREFIX)) or 0)


def test_a_member_of_a_mapped_group_is_held_to_its_plan(groups):
    """A team member without a subscription gets the team plan's 2/min, not the default plan's 5/min."""
    member = UserFactory()
    member.groups.add(groups["team"])
    browser = signed_in(member)
    responses = [browser.get(PING) for _ in range(3)]
    assert [r.status_code for r in responses] == [200, 200, 429]
    assert responses[0]["RateLimit-Policy"] == TEAM
    assert policy(UserFactory()) == FREE  # a user in no group: the default plan


def test_each_member_is_counted_as_themselves(groups):
    """A group plan gives every member its limits on their own counters (u.<pk>), never one shared pool: the
    second member is admitted twice after the first used up the team's 2/min, and each counter holds exactly
    its member's two."""
    first, second = UserFactory(), UserFactory()
    groups["team"].user_set.add(first, second)
    for member in (first, second):
        browser = signed_in(member)
        assert [browser.get(PING).status_code for _ in range(3)] == [200, 200, 429]
    for member in (first, second):
        report = status(f"u.{member.pk}")
        assert (report["client"], report["plan"]) == (f"u.{member.pk}", "team")
        assert [(limit["used"], limit["remaining"]) for limit in report["limits"]] == [(2, 0)]


def test_the_usage_api_names_the_group_plan(groups):
    """The member's own standing (/api/v1/usage/current) is that of the plan their requests are decided on."""
    member = UserFactory()
    member.groups.add(groups["team"])
    standing = signed_in(member).get("/api/v1/usage/current").json()
    assert (standing["client"], standing["plan"]["slug"]) == (f"u.{member.pk}", "team")
    assert [limit["quota"] for limit in standing["limits"]] == [2]


def test_of_two_mapped_groups_the_higher_priority_plan_wins(groups):
    """In team (priority 1) and partners (priority 5): the partner plan, whichever group was joined first."""
    member = UserFactory()
    member.groups.add(groups["team"], groups["partners"])
    assert policy(member) == PARTNER


def test_a_priority_tie_goes_to_the_older_plan(groups, plans):
    """Two mapped groups whose plans have one priority: the plan created first (lowest id), whatever the groups'
    names or the order they were joined in."""
    plans["partner"].priority = plans["team"].priority
    plans["partner"].save()
    member = UserFactory()
    member.groups.add(groups["partners"], groups["team"])
    assert plans["team"].pk < plans["partner"].pk
    assert policy(member) == TEAM


def test_a_subscription_beats_any_group(groups, plans):
    """An active subscription always decides, even on a plan of lower priority than the member's group's; an
    inactive one does not, and the group plan applies."""
    member = UserFactory()
    member.groups.add(groups["partners"])
    sub = SubscriptionFactory(user=member, plan=plans["free"])
    assert policy(member) == FREE
    Subscription.objects.filter(pk=sub.pk).update(is_active=False)
    default_engine.runtime().rules.reload()  # update() sends no signal: reload as a later rules change would
    assert policy(member) == PARTNER


def test_leaving_the_group_moves_the_member_back_to_the_default_plan(
    groups, redis_client, django_capture_on_commit_callbacks
):
    """Removed from the team group: the rules version moves when the change commits, and the next request is
    on the default plan."""
    member = UserFactory()
    member.groups.add(groups["team"])
    assert policy(member) == TEAM
    before = rules_version(redis_client)
    with django_capture_on_commit_callbacks(execute=True):
        member.groups.remove(groups["team"])
    assert rules_version(redis_client) == before + 1
    assert policy(member) == FREE


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda member, team: member.groups.remove(team), id="user.groups.remove"),
        pytest.param(lambda member, team: team.user_set.remove(member), id="group.user_set.remove"),
        pytest.param(lambda member, team: member.groups.clear(), id="user.groups.clear"),
        pytest.param(lambda member, team: team.user_set.clear(), id="group.user_set.clear"),
        pytest.param(lambda member, team: team.delete(), id="group deleted"),
        pytest.param(lambda member, team: GroupPlan.objects.get(group=team).delete(), id="mapping deleted"),
    ],
)
def test_another_process_sees_the_member_leave_at_its_next_poll(
    groups, redis_client, django_capture_on_commit_callbacks, change
):
    """Another process, which cached the member on the team plan, reads the default plan after its poller sees
    the version move, whichever side of the membership changed or whatever took the mapping away."""
    member = UserFactory()
    member.groups.add(groups["team"])
    other = RulesCache(
        PlansRulesBackend(), RulesVersion(redis_client, quota_settings.KEY_PREFIX), interval=1, cache_size=16
    )
    other.current()
    assert other.subscriber_for_user(member.pk).plan_id == groups["team"].quota_plan.plan_id
    with django_capture_on_commit_callbacks(execute=True):
        change(member, groups["team"])
    assert other.subscriber_for_user(member.pk) is not None  # cached until the version is seen
    other.poll()
    other.current()
    assert other.subscriber_for_user(member.pk) is None  # the default plan


def test_joining_a_group_and_remapping_it_reach_the_member(groups, plans, django_capture_on_commit_callbacks):
    """Joining a mapped group, and the mapping moving to another plan, both apply from the next request."""
    member = UserFactory()
    assert policy(member) == FREE
    with django_capture_on_commit_callbacks(execute=True):
        groups["team"].user_set.add(member)
    assert policy(member) == TEAM
    with django_capture_on_commit_callbacks(execute=True):
        mapping = GroupPlan.objects.get(group=groups["team"])
        mapping.plan = plans["partner"]
        mapping.save()
    assert policy(member) == PARTNER


def test_memberships_of_unmapped_groups_leave_the_rules_alone(groups, redis_client, django_capture_on_commit_callbacks):
    """Joining or leaving a group that has no plan changes no one's plan, so no process reloads its rules."""
    member = UserFactory()
    default_engine.runtime().rules.current()
    before = rules_version(redis_client)
    with django_capture_on_commit_callbacks(execute=True):
        member.groups.add(groups["newsletter"])
        groups["newsletter"].user_set.remove(member)
        groups["newsletter"].user_set.clear()
    assert rules_version(redis_client) == before


def test_quota_status_names_a_members_plan_and_counter(groups):
    """The operators' command reads a group member as the engine does: client u.<pk>, on the group's plan."""
    member = UserFactory()
    member.groups.add(groups["team"])
    report = status(f"u.{member.pk}")
    assert (report["client"], report["plan"]) == (f"u.{member.pk}", "team")
    assert report["note"] == f"user {member.pk} has no subscription: their plan comes from their groups"


# The admin: the mapping is edited with its own model permissions.

ADD, LIST = "/admin/quota_plans/groupplan/add/", "/admin/quota_plans/groupplan/"


def staff_with(*codenames: str) -> Client:
    user = UserFactory(is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="quota_plans", codename__in=codenames))
    return signed_in(user)


def test_staff_with_the_permissions_map_a_group_and_its_members_follow(plans, django_capture_on_commit_callbacks):
    """add_groupplan maps a group to a plan from the admin's form; the members are on it at their next request."""
    group, member = Group.objects.create(name="beta"), UserFactory()
    member.groups.add(group)
    editor = staff_with("view_groupplan", "add_groupplan", "change_groupplan")
    assert editor.get(ADD).status_code == 200
    with django_capture_on_commit_callbacks(execute=True):
        response = editor.post(ADD, {"group": group.pk, "plan": plans["team"].pk})
    assert response.status_code == 302
    assert GroupPlan.objects.get(group=group).plan == plans["team"]
    assert policy(member) == TEAM
    page = editor.get(LIST).content.decode()
    assert "beta" in page
    assert "Team" in page


def test_a_group_already_mapped_is_refused_with_the_plan_it_is_on(groups, plans):
    """A second mapping of one group is refused by the form, naming the plan the group is already on."""
    editor = staff_with("view_groupplan", "add_groupplan")
    response = editor.post(ADD, {"group": groups["team"].pk, "plan": plans["partner"].pk})
    assert response.status_code == 200
    assert "Group “team” is already on plan “Team”" in response.content.decode()
    assert GroupPlan.objects.get(group=groups["team"]).plan == plans["team"]


def test_staff_without_the_change_permission_cannot_edit_a_mapping(groups, plans):
    """A viewer sees the mappings but cannot add, change or delete one: the server refuses the POSTs."""
    mapping = GroupPlan.objects.get(group=groups["team"])
    viewer = staff_with("view_groupplan", "view_plan")
    assert viewer.get(LIST).status_code == 200
    change = f"{LIST}{mapping.pk}/change/"
    assert 'name="plan"' not in viewer.get(change).content.decode()  # shown read-only
    assert viewer.get(ADD).status_code == 403
    assert viewer.post(ADD, {"group": groups["newsletter"].pk, "plan": plans["team"].pk}).status_code == 403
    assert viewer.post(change, {"group": groups["team"].pk, "plan": plans["partner"].pk}).status_code == 403
    assert viewer.post(f"{LIST}{mapping.pk}/delete/", {"post": "yes"}).status_code == 403
    assert GroupPlan.objects.get(pk=mapping.pk).plan == plans["team"]
    assert not GroupPlan.objects.filter(group=groups["newsletter"]).exists()


def test_staff_without_any_group_plan_permission_cannot_see_the_mappings(groups):
    assert staff_with("view_plan").get(LIST).status_code == 403


def test_a_plan_groups_are_mapped_to_cannot_be_deleted_under_them(groups, plans):
    """Deleting a plan with mapped groups is refused (PROTECT), even to staff who may delete both: its members
    would drop to the default plan unnoticed. The page names the mapping in the way."""
    admin = staff_with("view_plan", "delete_plan", "view_groupplan", "delete_groupplan")
    page = admin.get(f"/admin/quota_plans/plan/{plans['team'].pk}/delete/").content.decode()
    assert "would require deleting the following protected related objects" in page
    assert "team → Team" in page
    admin.post(f"/admin/quota_plans/plan/{plans['team'].pk}/delete/", {"post": "yes"})
    assert GroupPlan.objects.filter(plan=plans["team"]).exists()
