"""The plans admin carries its own templates, and issuing keys never leaves a key nobody can read.

A project that installs ``plans`` without ``dashboard`` gets the same admin
pages; a result page that cannot be rendered rolls its keys back.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.test import Client

import plans
from plans.models import APIKey, Subscription
from tests.factories import PlanFactory, SubscriptionFactory, UserFactory

pytestmark = pytest.mark.django_db

RAW_KEY = re.compile(r"qk_[A-Za-z0-9_-]{20,}")
PLANS_TEMPLATES = Path(plans.__file__).resolve().parent / "templates"


@pytest.fixture
def without_dashboard(settings):
    """The project's apps minus ``dashboard``, as in a project that installs only quotas and plans."""
    settings.INSTALLED_APPS = [app for app in django_settings.INSTALLED_APPS if app != "dashboard"]


@pytest.fixture
def admin_client_() -> Client:
    browser = Client(raise_request_exception=False)
    browser.force_login(UserFactory(is_staff=True, is_superuser=True))
    return browser


def origins(response) -> set[str]:
    return {t.origin.name for t in response.templates if t.origin and t.origin.name}


def test_issuing_a_key_renders_from_plans_templates_without_dashboard(without_dashboard, admin_client_):
    """The intermediate page and the page showing the raw key both answer 200 from plans/templates/."""
    sub = SubscriptionFactory()
    step = {"action": "issue_api_key", "_selected_action": [sub.pk]}
    asked = admin_client_.post("/admin/quota_plans/subscription/", step)
    assert asked.status_code == 200
    assert str(PLANS_TEMPLATES / "admin/quota_plans/subscription/issue_keys.html") in origins(asked)

    shown = admin_client_.post("/admin/quota_plans/subscription/", {**step, "issue": "1", "expires": ""})
    assert shown.status_code == 200
    assert "no-store" in shown["Cache-Control"]
    assert str(PLANS_TEMPLATES / "admin/quota_plans/subscription/issued_keys.html") in origins(shown)
    raw = RAW_KEY.findall(shown.content.decode())
    assert len(raw) == 1
    assert APIKey.objects.get(subscription=sub).prefix == raw[0][:10]


def test_moving_to_a_plan_renders_from_plans_templates_without_dashboard(without_dashboard, admin_client_):
    """The plan chooser answers 200 from plans/templates/, and applying it moves the subscription."""
    sub, pro = SubscriptionFactory(), PlanFactory(slug="pro")
    step = {"action": "move_to_plan", "_selected_action": [sub.pk]}
    asked = admin_client_.post("/admin/quota_plans/subscription/", step)
    assert asked.status_code == 200
    assert str(PLANS_TEMPLATES / "admin/quota_plans/subscription/move_plan.html") in origins(asked)

    moved = admin_client_.post("/admin/quota_plans/subscription/", {**step, "apply": "1", "plan": pro.pk})
    assert moved.status_code == 302
    assert Subscription.objects.get(pk=sub.pk).plan == pro


def test_a_key_page_that_cannot_render_leaves_no_key_behind(settings, tmp_path, admin_client_):
    """When the page showing the raw keys fails (here a template shadowing ours extends one that does not
    exist), the answer is a server error, and no key row exists whose raw key was never shown."""
    broken = tmp_path / "admin/quota_plans/subscription/issued_keys.html"
    broken.parent.mkdir(parents=True)
    broken.write_text('{% extends "no/such/template.html" %}')
    settings.TEMPLATES = [{**settings.TEMPLATES[0], "DIRS": [str(tmp_path)]}]
    sub = SubscriptionFactory()

    response = admin_client_.post(
        "/admin/quota_plans/subscription/",
        {"action": "issue_api_key", "_selected_action": [sub.pk], "issue": "1", "expires": ""},
    )
    assert response.status_code == 500
    assert not APIKey.objects.filter(subscription=sub).exists()
