"""Start-up checks of choices a project must make on purpose.

What happens while Redis is down is a visible choice: check warns until it is made, quota_doctor says which one
is in force (and /healthz tells anyone: tests/metrics/test_view.py). Limits turned off are a deploy warning;
naive datetimes an error.
"""

from __future__ import annotations

import contextlib
import json
from io import StringIO

import pytest
from django.core import checks
from django.core.management import call_command


def check_ids() -> list[str]:
    return [m.id for m in checks.run_checks()]


def test_an_unset_failure_mode_is_warned_about(settings):
    settings.QUOTAS = {k: v for k, v in settings.QUOTAS.items() if k != "FAILURE_MODE"}
    found = [m for m in checks.run_checks() if m.id == "quotas.W004"]
    assert len(found) == 1
    assert "QUOTAS['FAILURE_MODE'] is not set" in found[0].msg
    assert "'closed'" in found[0].hint


@pytest.mark.parametrize("mode", ["local", "open", "closed"])
def test_a_chosen_failure_mode_is_not(settings, mode):
    settings.QUOTAS = {**settings.QUOTAS, "FAILURE_MODE": mode}
    assert "quotas.W004" not in check_ids()


def test_nor_when_limits_are_off(settings):
    settings.QUOTAS = {k: v for k, v in settings.QUOTAS.items() if k != "FAILURE_MODE"} | {"ENABLED": False}
    assert "quotas.W004" not in check_ids()


@pytest.mark.django_db
@pytest.mark.parametrize("mode", ["local", "closed"])
def test_quota_doctor_names_the_failure_mode(set_quotas, mode):
    set_quotas(FAILURE_MODE=mode)
    out = StringIO()
    with contextlib.suppress(SystemExit):
        call_command("quota_doctor", "--json", stdout=out)
    finding = {f["name"]: f for f in json.loads(out.getvalue())["checks"]}["failure_mode"]
    assert finding["status"] == "ok"
    assert f"'{mode}' (set in QUOTAS)" in finding["detail"]


def test_limits_off_are_a_deploy_warning(settings):
    """ENABLED False turns every quota off: fine in tests, a warning in check --deploy."""
    settings.QUOTAS = {**settings.QUOTAS, "ENABLED": False}
    assert "quotas.W005" not in check_ids()
    found = [m for m in checks.run_checks(include_deployment_checks=True) if m.id == "quotas.W005"]
    assert len(found) == 1
    assert "no quota or rate limit applies" in found[0].msg
    settings.QUOTAS = {**settings.QUOTAS, "ENABLED": True}
    assert "quotas.W005" not in [m.id for m in checks.run_checks(include_deployment_checks=True)]


def test_naive_datetimes_are_refused_at_start_up(settings):
    """USE_TZ = False would break budgets, expiry and bans at run time: a system check error instead."""
    settings.USE_TZ = False
    found = [m for m in checks.run_checks() if m.id == "quotas.E057"]
    assert len(found) == 1
    assert found[0].is_serious()
    settings.USE_TZ = True
    assert "quotas.E057" not in check_ids()
