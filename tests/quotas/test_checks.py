"""System checks name the bad setting and how to fix it."""

from __future__ import annotations

import pytest
from django.core.checks import run_checks
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from quotas.checks import check_settings
from quotas.checks.front_doors import (
    API_KEY_AUTHENTICATION,
    check_drf_adapter,
    check_drf_rates,
    check_middleware,
    check_sign_in_middleware,
)
from quotas.settings import DEFAULTS, quota_settings


def ids(messages):
    return sorted(m.id for m in messages)


def test_project_settings_pass():
    assert check_settings() == []
    assert check_drf_rates() == []
    assert check_middleware() == []
    assert check_sign_in_middleware() == []


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ({"REDIS_URL": "http://nope"}, "quotas.E002"),
        ({"KEY_PREFIX": "{bad}"}, "quotas.E003"),
        ({"RULES_BACKEND": "no.such.Backend"}, "quotas.E004"),
        ({"SOCKET_TIMEOUT": -1}, "quotas.E005"),
        ({"LOCAL_DENY_CACHE_SIZE": 0}, "quotas.E006"),
        ({"KEY_BUCKETS": 0}, "quotas.E014"),
        ({"KEY_BUCKETS": "1024"}, "quotas.E014"),
        ({"TRUSTED_PROXIES": ["10.0.0.0/8", "not-an-ip"]}, "quotas.E007"),
        ({"TRUSTED_PROXIES": "10.0.0.0/8"}, "quotas.E007"),
        ({"IPV6_PREFIX_LENGTH": 200}, "quotas.E008"),
        ({"FAILURE_MODE": "sometimes"}, "quotas.E010"),
        ({"API_KEY_HEADER": "X API Key"}, "quotas.E011"),
        ({"REDIS_ULR": "redis://x"}, "quotas.W001"),
        ({"MAX_REQUEST_WEIGHT": 10**12 + 1}, "quotas.E016"),
        ({"MAX_REQUEST_WEIGHT": 0}, "quotas.E016"),
        ({"MAX_REQUEST_COST": 10**9 + 1}, "quotas.E017"),
        ({"MAX_REQUEST_COST": 1.5}, "quotas.E017"),
        ({"DENIAL_RATE_ALERT": 1.5}, "quotas.E046"),
        ({"DENIAL_RATE_ALERT": -0.1}, "quotas.E046"),
        ({"DENIAL_RATE_ALERT": "0.1"}, "quotas.E046"),
        ({"DENIAL_RATE_ALERT": True}, "quotas.E046"),
        ({"DENIAL_RATE_ALERT": float("nan")}, "quotas.E046"),
        ({"SHAPING_CLIENT_SHARE": 0}, "quotas.E047"),
        ({"SHAPING_CLIENT_SHARE": 1.5}, "quotas.E047"),
        ({"SHAPING_CLIENT_SHARE": "0.5"}, "quotas.E047"),
        ({"SHAPING_CLIENT_SHARE": True}, "quotas.E047"),
        ({"REFUSALS_ANONYMOUS_PER_HOUR": -1}, "quotas.E048"),
        ({"REFUSALS_ANONYMOUS_PER_HOUR": 10.5}, "quotas.E048"),
        ({"REFUSALS_ANONYMOUS_PER_HOUR": None}, "quotas.E048"),
        ({"USAGE_API_RATE": "lots"}, "quotas.E049"),
        ({"USAGE_API_RATE": 120}, "quotas.E049"),
        ({"ENABLED": "no"}, "quotas.E050"),
        ({"USAGE_SPOOL_DIR": 3}, "quotas.E051"),
        ({"LEGACY_HEADERS": 1}, "quotas.E052"),
        ({"DRF_ALGORITHM": "magic"}, "quotas.E030"),
        ({"PATH_LIMITS": "/hooks/"}, "quotas.E040"),
        ({"FAILED_AUTH_LIMITS": {"ip": "10/min"}}, "quotas.E018"),
        ({"FAILED_AUTH_LIMITS": {"address": "lots"}}, "quotas.E018"),
        ({"BUDGET_TIME_ZONE": "Mars/Olympus"}, "quotas.E012"),
        ({"LOCAL_SHARE": 0}, "quotas.E013"),
    ],
)
def test_bad_setting_is_reported(settings, override, expected):
    settings.QUOTAS = {**settings.QUOTAS, **override}
    messages = check_settings()
    assert ids(messages) == [expected]
    assert messages[0].hint


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("redis://127.0.0.1:6379/0?db=zero", "malformed redis:// URL: Invalid value for 'db'"),
        ("rediss://:s3cret@cache:6380/0?socket_timeout=soon", "malformed rediss:// URL: Invalid value"),
        ("REDIS://127.0.0.1:6379/0", "malformed redis:// URL: Redis URL must specify"),
        ("redis://127.0.0.1:port/0", "malformed redis:// URL: Port could not be cast"),
    ],
)
def test_a_one_server_url_redis_py_refuses_is_quotas_e002_once(settings, url, message):
    """What only redis-py reads of a redis:// URL (an option's value, the scheme's case) is still refused at
    start-up, as quotas.E002 with the setting's hint, once, and without the password; the settings' own check,
    which imports no redis, reports the rest (the port)."""
    settings.QUOTAS = {**settings.QUOTAS, "REDIS_URL": url}
    found = [m for m in run_checks() if m.id == "quotas.E002"]
    assert [m.msg.partition(": ")[2][: len(message)] for m in found] == [message]
    assert found[0].hint.startswith("Use redis://host:6379/0")
    assert "s3cret" not in found[0].msg


def test_unix_is_a_trusted_proxy_entry(settings):
    """'unix' names a proxy on a Unix socket; anything else must be an IP network."""
    settings.QUOTAS = {**settings.QUOTAS, "TRUSTED_PROXIES": ["unix", "10.0.0.0/8", "::1"]}
    assert check_settings() == []
    settings.QUOTAS = {**settings.QUOTAS, "TRUSTED_PROXIES": ["unix:/run/nginx.sock"]}
    assert ids(check_settings()) == ["quotas.E007"]


def test_typo_gets_a_suggestion(settings):
    settings.QUOTAS = {**settings.QUOTAS, "TRUSTED_PROXY": []}
    assert "TRUSTED_PROXIES" in check_settings()[0].hint


def test_bad_drf_rate_is_reported(settings):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"anon": "lots/day"}}
    assert ids(check_drf_rates()) == ["quotas.E020"]


def test_missing_middleware_is_reported(settings):
    settings.MIDDLEWARE = [m for m in settings.MIDDLEWARE if "quotas" not in m]
    assert ids(check_middleware()) == ["quotas.W002"]


def test_manage_py_check_fails_on_errors(settings):
    settings.QUOTAS = {**settings.QUOTAS, "FAILURE_MODE": "sometimes"}
    with pytest.raises(SystemCheckError, match="FAILURE_MODE"):
        call_command("check")


def test_api_key_authentication_should_come_first(settings):
    """W003: with a rules backend, APIKeyAuthentication missing or not first (DRF would answer bad keys 403)."""
    drf = settings.REST_FRAMEWORK
    assert check_drf_adapter() == []
    classes = [c for c in drf["DEFAULT_AUTHENTICATION_CLASSES"] if "quotas" not in c]
    settings.REST_FRAMEWORK = {**drf, "DEFAULT_AUTHENTICATION_CLASSES": classes}
    assert ids(check_drf_adapter()) == ["quotas.W003"]
    assert "is not in" in check_drf_adapter()[0].msg
    settings.REST_FRAMEWORK = {**drf, "DEFAULT_AUTHENTICATION_CLASSES": [*classes, API_KEY_AUTHENTICATION]}
    assert "is not the first" in check_drf_adapter()[0].msg
    settings.QUOTAS = {**settings.QUOTAS, "RULES_BACKEND": None}
    assert check_drf_adapter() == []


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ({"METRICS": "s3cret"}, "quotas.E034"),
        ({"USAGE_FLUSH": 500}, "quotas.E034"),
        ({"METRICS": {"TOKEN": 1234}}, "quotas.E035"),
        ({"METRICS": {"ALLOW_LOOPBACK": "yes"}}, "quotas.E015"),
        ({"USAGE_FLUSH": {"BATCH_SIZE": 0}}, "quotas.E036"),
        ({"USAGE_FLUSH": {"BATCH_SIZE": "500"}}, "quotas.E036"),
        ({"USAGE_FLUSH": {"BATCH_DELAY": -1}}, "quotas.E036"),
        ({"USAGE_FLUSH": {"BATCH_SIZ": 100}}, "quotas.W001"),
    ],
)
def test_bad_nested_setting_is_reported(settings, override, expected):
    """Nested sections are checked like the top level: type errors are E0xx, unknown keys W001."""
    settings.QUOTAS = {**settings.QUOTAS, **override}
    messages = check_settings()
    assert ids(messages) == [expected]
    assert messages[0].hint


def test_unknown_nested_key_gets_a_suggestion(settings):
    settings.QUOTAS = {**settings.QUOTAS, "METRICS": {"TOKN": "x"}}
    (warning,) = check_settings()
    assert warning.msg == "Unknown setting QUOTAS['METRICS']['TOKN'] is ignored."
    assert warning.hint == "Did you mean 'TOKEN'?"


def test_a_bad_token_is_not_repeated_in_the_message(settings):
    """The token is a secret: the check names the setting, never its value."""
    settings.QUOTAS = {**settings.QUOTAS, "METRICS": {"TOKEN": b"s3cret-bytes"}}
    (error,) = check_settings()
    assert "s3cret" not in error.msg + error.hint


def test_sections_merge_over_their_defaults_at_call_time(settings):
    """A nested dict overrides only the keys it names; nothing is written into django.conf.settings."""
    settings.QUOTAS = {**settings.QUOTAS, "USAGE_FLUSH": {"BATCH_SIZE": 7}}
    assert quota_settings.USAGE_FLUSH == {"BATCH_SIZE": 7, "BATCH_DELAY": 0.0}
    settings.QUOTAS = {k: v for k, v in settings.QUOTAS.items() if k != "USAGE_FLUSH"}
    assert DEFAULTS["USAGE_FLUSH"] == quota_settings.USAGE_FLUSH
    assert "USAGE_FLUSH" not in settings.QUOTAS


@pytest.mark.parametrize(
    ("name", "close"),
    [("DEFAULT_ALGORITHM", "DRF_ALGORITHM"), ("METRICS_ALLOW_LOOPBACK", None)],
)
def test_names_never_released_are_unknown_settings(settings, name, close):
    """Earlier names of settings are not read: each is an unknown setting, with a suggestion where one is close."""
    settings.QUOTAS = {**settings.QUOTAS, name: True}
    (warning,) = check_settings()
    assert warning.id == "quotas.W001"
    assert name in warning.msg
    if close:
        assert warning.hint == f"Did you mean {close!r}?"
