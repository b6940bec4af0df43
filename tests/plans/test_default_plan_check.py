"""A default plan with only scoped limits leaves every other view unlimited: the check, the doctor and the
admin say so (quota_plans.W001)."""

from __future__ import annotations

import contextlib
import json
import re
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client

from plans.models import EndpointLimit, Plan
from tests.factories import EndpointLimitFactory, PlanFactory, UserFactory

pytestmark = pytest.mark.django_db


def database_check_ids() -> list[str]:
    from django.core import checks

    return [m.id for m in checks.run_checks(databases=["default"])]


@pytest.fixture
def scoped_default(settings):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"anon": "10/min"}}
    plan = PlanFactory(slug="free", is_default=True)
    EndpointLimitFactory(plan=plan, name="search", scope="search", rates="5/min")
    return plan


def test_a_default_plan_with_only_scoped_limits_is_warned_about(scoped_default):
    from django.core import checks

    found = [m for m in checks.run_checks(databases=["default"]) if m.id == "quota_plans.W001"]
    assert len(found) == 1
    assert "'free' has no limit for every request" in found[0].msg
    assert "'anon' no longer apply" in found[0].msg
    assert "quota_plans.W001" not in [m.id for m in checks.run_checks()]  # only where the database is checked


def test_a_limit_for_every_request_silences_it(scoped_default):
    EndpointLimitFactory(plan=scoped_default, name="global", rates="100/min")
    assert "quota_plans.W001" not in database_check_ids()


def test_no_default_plan_is_not_warned_about(scoped_default):
    Plan.objects.update(is_default=False)
    assert "quota_plans.W001" not in database_check_ids()


def test_quota_doctor_reports_it(scoped_default):
    out = StringIO()
    with contextlib.suppress(SystemExit):  # it exits non-zero on a warning
        call_command("quota_doctor", "--json", stdout=out)
    findings = {f["name"]: f for f in json.loads(out.getvalue())["checks"]}
    assert findings["django quota_plans.W001"]["status"] == "warning"


def test_the_admin_warns_when_such_a_plan_is_saved_as_the_default(scoped_default):
    browser = Client()
    browser.force_login(UserFactory(is_staff=True, is_superuser=True))
    limit = EndpointLimit.objects.get()
    data = {
        "slug": "free", "name": "Free", "monthly_price": "0", "priority": "0", "description": "", "is_default": "on",
        "ban_threshold": "0", "ban_window": "60", "ban_durations": "60", "local_allowances": "on",
        "limits-TOTAL_FORMS": "1", "limits-INITIAL_FORMS": "1",
        "limits-0-id": limit.pk, "limits-0-plan": scoped_default.pk,
        "limits-0-name": "search", "limits-0-scope": "search", "limits-0-rates": "5/min",
        "limits-0-algorithm": limit.algorithm, "limits-0-weight": "1", "limits-0-max_delay": "0", "limits-0-price": "0",
        "period_quotas-TOTAL_FORMS": "0", "period_quotas-INITIAL_FORMS": "0",
        "budgets-TOTAL_FORMS": "0", "budgets-INITIAL_FORMS": "0",
    }  # fmt: skip
    saved = browser.post(f"/admin/quota_plans/plan/{scoped_default.pk}/change/", data, follow=True)
    assert saved.status_code == 200
    text = saved.content.decode()
    assert saved.redirect_chain, re.findall(r"errorlist.{0,200}", text, re.S)
    assert "has no limit for every request" in text
    assert "is unlimited for anonymous clients" in text
