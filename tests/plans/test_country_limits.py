"""Per-country limits: a limit kept to some countries holds only clients whose address a GeoIP2 database places
in one of them. The database is written by the test itself (mmdb-writer), in the GeoIP2-Country record shape."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import geoip2.database
import pytest
from django.contrib.auth.models import Permission
from django.core import checks
from django.core.exceptions import ValidationError
from django.test import Client
from mmdb_writer import MMDBWriter
from netaddr import IPSet
from prometheus_client import REGISTRY
from rest_framework.test import APIClient

from plans.models import EndpointLimit
from quotas.rules.limits import LimitRule
from quotas.rules.snapshot import RequestRules
from tests.factories import EndpointLimitFactory, PlanFactory, UserFactory, issue_key

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]

CHINA, GERMANY, NOWHERE = "203.0.113.7", "198.51.100.7", "192.0.2.1"  # NOWHERE is in no network of the database


def write_country_db(path: Path, countries: dict[str, str]) -> Path:
    """A GeoIP2-Country database at ``path`` placing each network of ``countries`` in its country."""
    writer = MMDBWriter(ip_version=6, ipv4_compatible=True, database_type="GeoIP2-Country", languages=["en"],
                        description={"en": "django-quota-platform tests"})  # fmt: skip
    for network, code in countries.items():
        writer.insert_network(IPSet([network]), {"country": {"iso_code": code}})
    writer.to_db_file(str(path))
    return path


@pytest.fixture
def country_db(tmp_path: Path) -> Path:
    return write_country_db(tmp_path / "countries.mmdb", {"203.0.113.0/24": "CN", "198.51.100.0/24": "DE"})


@pytest.fixture
def free(db):
    """The default plan: 100 a minute for everyone, and 2 a minute for clients in China."""
    plan = PlanFactory(slug="free", is_default=True)
    EndpointLimitFactory(plan=plan, name="global", rates="100/min", algorithm="fixed_window")
    EndpointLimitFactory(plan=plan, name="cn-anon", rates="2/min", algorithm="fixed_window", countries="CN")
    return plan


@pytest.fixture
def client():
    return APIClient()


def skipped(reason: str) -> float:
    return REGISTRY.get_sample_value("quota_country_limits_skipped_total", {"reason": reason}) or 0.0


def test_the_written_database_reads_back_with_geoip2(country_db):
    """mmdb-writer's file is a real GeoIP2-Country database to MaxMind's own reader."""
    with geoip2.database.Reader(str(country_db)) as reader:
        assert reader.metadata().database_type == "GeoIP2-Country"
        assert reader.country(CHINA).country.iso_code == "CN"
        assert reader.country(GERMANY).country.iso_code == "DE"
        with pytest.raises(geoip2.errors.AddressNotFoundError):
            reader.country(NOWHERE)


def test_a_client_from_a_listed_country_is_held_to_the_country_limit(client, free, country_db, set_quotas):
    """Two requests from China pass, the third is a 429 problem naming the country limit, with its headers."""
    set_quotas(GEOIP_COUNTRY_DB=str(country_db))
    first = client.get("/api/demo/ping", REMOTE_ADDR=CHINA)
    assert first.status_code == 200
    assert first["RateLimit-Policy"] == '"cn-anon";q=2;w=60, "global";q=100;w=60'
    assert client.get("/api/demo/ping", REMOTE_ADDR=CHINA).status_code == 200
    refused = client.get("/api/demo/ping", REMOTE_ADDR=CHINA)
    assert refused.status_code == 429
    assert refused["Content-Type"] == "application/problem+json"
    body = json.loads(refused.content)
    assert body["limit"]["name"] == "cn-anon"
    assert body["limit"]["quota"] == 2
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert body["retry_after"] == int(refused["Retry-After"])
    assert refused["X-RateLimit-Remaining"] == "0"


def test_a_client_from_another_country_or_none_is_not(client, free, country_db, set_quotas):
    """Clients placed in Germany, or in no country at all, see only the plan-wide limit."""
    set_quotas(GEOIP_COUNTRY_DB=str(country_db))
    for address in (GERMANY, NOWHERE):
        responses = [client.get("/api/demo/ping", REMOTE_ADDR=address) for _ in range(5)]
        assert [r.status_code for r in responses] == [200] * 5
        assert responses[-1]["RateLimit-Policy"] == '"global";q=100;w=60'
        assert responses[-1]["X-RateLimit-Remaining"] == "95"


def test_the_country_is_the_client_address_the_platform_resolves(client, free, country_db, set_quotas):
    """Behind a trusted proxy the forwarded address is placed; from an untrusted peer a forged header is not."""
    set_quotas(GEOIP_COUNTRY_DB=str(country_db), TRUSTED_PROXIES=["10.0.0.0/8"])
    via_proxy = [client.get("/api/demo/ping", REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR=CHINA) for _ in range(3)]
    assert [r.status_code for r in via_proxy] == [200, 200, 429]
    forged = [client.get("/api/demo/ping", REMOTE_ADDR=GERMANY, HTTP_X_FORWARDED_FOR=CHINA) for _ in range(3)]
    assert [r.status_code for r in forged] == [200, 200, 200]


def test_changing_the_setting_opens_the_database_it_names(client, free, country_db, tmp_path, set_quotas):
    """The reader follows QUOTAS: another database placing the same network elsewhere frees the client."""
    set_quotas(GEOIP_COUNTRY_DB=str(country_db))
    assert [client.get("/api/demo/ping", REMOTE_ADDR=CHINA).status_code for _ in range(3)] == [200, 200, 429]
    moved = write_country_db(tmp_path / "moved.mmdb", {"203.0.113.0/24": "DE"})
    set_quotas(GEOIP_COUNTRY_DB=str(moved))
    assert client.get("/api/demo/ping", REMOTE_ADDR=CHINA).status_code == 200


def test_without_the_database_the_limit_applies_to_nobody_said_once_and_counted(client, free, tmp_path, set_quotas,
                                                                                  caplog):  # fmt: skip
    """A missing file: every request passes the country limit, one log line says why, each request is counted."""
    set_quotas(GEOIP_COUNTRY_DB=str(tmp_path / "absent.mmdb"))
    before = skipped("unreadable")
    with caplog.at_level(logging.ERROR, logger="quotas.identity.countries"):
        codes = [client.get("/api/demo/ping", REMOTE_ADDR=CHINA).status_code for _ in range(4)]
    assert codes == [200] * 4
    said = [r.getMessage() for r in caplog.records if r.name == "quotas.identity.countries"]
    assert len(said) == 1
    assert "absent.mmdb cannot be read" in said[0]
    assert skipped("unreadable") - before == 4


def test_a_plan_without_country_limits_never_asks_for_a_country(client, tmp_path, set_quotas, caplog):
    """No country limit matched: no lookup, so a missing database is neither logged nor counted."""
    plan = PlanFactory(slug="plain", is_default=True)
    EndpointLimitFactory(plan=plan, name="global", rates="100/min")
    set_quotas(GEOIP_COUNTRY_DB=str(tmp_path / "absent.mmdb"))
    before = skipped("unreadable")
    with caplog.at_level(logging.ERROR, logger="quotas.identity.countries"):
        assert client.get("/api/demo/ping", REMOTE_ADDR=CHINA).status_code == 200
    assert [r for r in caplog.records if r.name == "quotas.identity.countries"] == []
    assert skipped("unreadable") == before


def test_request_rules_set_country_limits_apart_in_the_plans_order():
    """A request's rules keep country limits aside; a country's own are added back in order, prices too."""
    everywhere = LimitRule(id="1", name="a", rates=(), price_micros=1)
    china = LimitRule(id="2", name="b", rates=(), price_micros=10, countries=frozenset({"CN", "RU"}))
    later = LimitRule(id="3", name="c", rates=(), price_micros=100)
    plain = RequestRules.of([everywhere, later])
    assert plain.by_country == ()
    mixed = RequestRules.of([everywhere, china, later])
    assert mixed.price_micros == 101
    assert mixed.in_country("RU").price_micros == 111
    assert mixed.in_country("DE").price_micros == 101
    assert mixed.in_country(None).price_micros == 101


@pytest.mark.parametrize(
    ("countries", "message"),
    [
        ("CN, UK", "'UK' is not an ISO 3166-1 code: write GB"),
        ("C1", "'C1' is not a two-letter country code"),
        ("CHN", "'CHN' is not a two-letter country code"),
        ("XX", "'XX' is not an assigned ISO 3166-1 alpha-2 code"),
        ("cn, CN", "CN given more than once"),
    ],
)
def test_bad_codes_are_refused_with_a_clear_message(free, countries, message):
    limit = EndpointLimit(plan=free, name="by-country", rates="1/min", countries=countries)
    with pytest.raises(ValidationError) as info:
        limit.full_clean()
    assert message in " ".join(info.value.message_dict["countries"])


def test_codes_are_stored_upper_cased_and_separated_by_commas(free):
    limit = EndpointLimit(plan=free, name="by-country", rates="1/min", countries="cn ru;de")
    limit.full_clean()
    assert limit.countries == "CN, RU, DE"
    assert limit.country_set == {"CN", "RU", "DE"}


def plan_form(plan, limit: EndpointLimit, countries: str) -> dict[str, object]:
    return {
        "slug": plan.slug, "name": plan.name, "monthly_price": "0", "priority": "0", "description": "",
        "is_default": "on", "ban_threshold": "0", "ban_window": "60", "ban_durations": "60", "local_allowances": "on",
        "limits-TOTAL_FORMS": "1", "limits-INITIAL_FORMS": "1", "limits-0-id": limit.pk, "limits-0-plan": plan.pk,
        "limits-0-name": limit.name, "limits-0-rates": limit.rates, "limits-0-algorithm": limit.algorithm,
        "limits-0-weight": "1", "limits-0-max_delay": "0", "limits-0-price": "0", "limits-0-countries": countries,
        "period_quotas-TOTAL_FORMS": "0", "period_quotas-INITIAL_FORMS": "0",
        "budgets-TOTAL_FORMS": "0", "budgets-INITIAL_FORMS": "0",
    }  # fmt: skip


def test_the_admin_refuses_a_bad_code_and_saves_good_ones(db):
    """A staff user who may change plans and limits is shown the code's error; good codes are saved tidied."""
    plan = PlanFactory(slug="free", name="Free", is_default=True)
    limit = EndpointLimitFactory(plan=plan, name="global", rates="100/min")
    user = UserFactory(is_staff=True)
    may = ["view_plan", "change_plan", "view_endpointlimit", "change_endpointlimit"]
    user.user_permissions.set(Permission.objects.filter(codename__in=may))
    browser = Client()
    browser.force_login(user)
    url = f"/admin/quota_plans/plan/{plan.pk}/change/"
    refused = browser.post(url, plan_form(plan, limit, "CN, UK"))
    assert refused.status_code == 200  # the form again, not a redirect
    assert "&#x27;UK&#x27; is not an ISO 3166-1 code: write GB" in refused.content.decode()
    limit.refresh_from_db()
    assert limit.countries == ""
    saved = browser.post(url, plan_form(plan, limit, "cn, ru"))
    assert saved.status_code == 302
    limit.refresh_from_db()
    assert limit.countries == "CN, RU"


def check_ids(**kwargs) -> list[str]:
    """The ids of the country checks (quotas.E080, E081, W082) among what the checks report."""
    ours = {"quotas.E080", "quotas.E081", "quotas.W082"}
    return [m.id for m in checks.run_checks(**kwargs) if m.id in ours]


def test_the_checks_say_a_country_limit_has_no_database(free, tmp_path, set_quotas):
    """W082 (a database check) while the setting is unset; E081 at every start once it names no database."""
    found = [m for m in checks.run_checks(databases=["default"]) if m.id == "quotas.W082"]
    assert len(found) == 1
    assert "free:cn-anon" in found[0].msg
    assert "QUOTAS['GEOIP_COUNTRY_DB'] is not set" in found[0].msg
    assert check_ids() == []  # no query in the default run
    not_a_database = tmp_path / "countries.mmdb"
    not_a_database.write_text("CN 203.0.113.0/24\n")
    set_quotas(GEOIP_COUNTRY_DB=str(not_a_database))
    errors = [m for m in checks.run_checks() if m.id == "quotas.E081"]
    assert len(errors) == 1
    assert "cannot be read as a database" in errors[0].msg
    assert errors[0].hint
    set_quotas(GEOIP_COUNTRY_DB=42)
    assert check_ids() == ["quotas.E080"]


def test_the_checks_are_quiet_with_a_database(free, country_db, set_quotas):
    set_quotas(GEOIP_COUNTRY_DB=str(country_db))
    assert check_ids(databases=["default"]) == []


def test_without_geoip2_installed_the_check_says_so(free, country_db, set_quotas, monkeypatch):
    """geoip2 made unimportable (as where the geoip extra is not installed): E081 names the package to install."""
    monkeypatch.setitem(__import__("sys").modules, "geoip2", None)
    set_quotas(GEOIP_COUNTRY_DB=str(country_db))
    found = {m.id: m for m in checks.run_checks(databases=["default"]) if m.id in {"quotas.E081", "quotas.W082"}}
    assert sorted(found) == ["quotas.E081", "quotas.W082"]  # in whatever order the apps registered them
    assert "geoip2 is not installed" in found["quotas.E081"].msg
    assert "[geoip]" in found["quotas.E081"].hint


def test_a_usage_api_limit_kept_to_a_country_holds_only_its_clients(client, free, country_db, set_quotas):
    """The usage API applies only its scope's limits: one kept to China holds a client there; a client
    elsewhere has no limit of the scope, so the default USAGE_API_RATE applies to it instead."""
    EndpointLimitFactory(plan=free, name="cn-usage", scope="usage_api", rates="1/min", countries="CN")
    set_quotas(GEOIP_COUNTRY_DB=str(country_db), USAGE_API_RATE="3/min")
    key = issue_key(plan=free)
    from_china = [client.get("/api/v1/usage/current", HTTP_X_API_KEY=key, REMOTE_ADDR=CHINA) for _ in range(2)]
    assert [r.status_code for r in from_china] == [200, 429]
    assert from_china[0]["RateLimit-Policy"] == '"cn-usage";q=1;w=60'
    other = issue_key(plan=free)
    elsewhere = [client.get("/api/v1/usage/current", HTTP_X_API_KEY=other, REMOTE_ADDR=GERMANY) for _ in range(2)]
    assert [r.status_code for r in elsewhere] == [200, 200]
    assert elsewhere[0]["RateLimit-Policy"].startswith('"usage_api";q=3')
