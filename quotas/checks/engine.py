"""The engine's system checks: every ``QUOTAS`` setting against its description, then what one setting alone
cannot say (time zones, the failure mode left to its default, OpenTelemetry, GraphQL's cap, the country database,
``ENABLED`` in a deployment). None of them opens a connection: they run at every manage.py start.
"""

from __future__ import annotations

from collections.abc import Iterable
from os import PathLike
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register
from django.db import DatabaseError
from django.utils.module_loading import import_string

from quotas.identity.countries import open_database
from quotas.observability.otel import available as otel_available
from quotas.settings import quota_settings
from quotas.settings.checking import check_quotas


def error(msg: str, hint: str, n: int) -> Error:
    """The error ``quotas.E<n>`` (three digits)."""
    return Error(msg, hint=hint, id=f"quotas.E{n:03d}")


@register(Tags.compatibility)
def check_settings(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list[CheckMessage]:
    """Validate every QUOTAS setting against its description: the engine's and each installed app's section."""
    return check_quotas(quota_settings.user_settings())


@register(Tags.compatibility)
def check_use_tz(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list[CheckMessage]:
    """quotas.E057: ``USE_TZ = False``. Budgets and period quotas begin in ``BUDGET_TIME_ZONE``, keys expire and
    bans end at instants, and usage days begin in that zone: all of it compares aware datetimes, which naive ones
    would break (a subscription could not be saved, a charged request would end in a 500)."""
    if getattr(settings, "USE_TZ", True):
        return []
    return [
        Error(
            "USE_TZ is False: the quota apps keep their times as aware datetimes (budget periods, key expiry, bans, "
            "usage days) and cannot run with naive ones.",
            hint="Set USE_TZ = True (Django's default since 5.0); the time zone periods begin in is "
            "QUOTAS['BUDGET_TIME_ZONE'].",
            id="quotas.E057",
        )
    ]


@register(Tags.compatibility)
def check_failure_mode_chosen(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list[CheckMessage]:
    """quotas.W004: ``FAILURE_MODE`` left to its default. What happens while Redis is down is a choice: with
    ``'local'`` a project whose Redis never started answers every request, which looks like a working setup."""
    raw = quota_settings.user_settings()
    if not isinstance(raw, dict) or "FAILURE_MODE" in raw or raw.get("ENABLED") is False:
        return []
    return [
        Warning(
            "QUOTAS['FAILURE_MODE'] is not set: while Redis is unreachable every process admits requests within "
            "its own share of each limit ('local'), and only one log line says so.",
            hint="Choose it: set QUOTAS['FAILURE_MODE'] to 'local', 'open' (admit every request) or 'closed' "
            "(refuse with 503); see Operations, when Redis or the database fails.",
            id="quotas.W004",
        )
    ]


@register(Tags.compatibility)
def check_opentelemetry(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list[CheckMessage]:
    """quotas.E071: ``OPENTELEMETRY`` on without the OpenTelemetry API installed."""
    if not quota_settings.OPENTELEMETRY or otel_available():
        return []
    return [
        error(
            "QUOTAS['OPENTELEMETRY'] is on, and the OpenTelemetry API (opentelemetry-api) is not installed.",
            "pip install 'django-quota-platform[opentelemetry]', or set QUOTAS['OPENTELEMETRY'] to False.",
            71,
        )
    ]


@register(Tags.security, deploy=True)
def check_enabled_in_deployment(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list[CheckMessage]:
    """quotas.W005 (``check --deploy``): ``ENABLED`` False turns every quota and rate limit off.

    ``ENABLED = False`` is meant for a project's tests; in a deployment no plan's limit applies (the
    failed-authentication limits stay on: ``FAILED_AUTH_LIMITS`` alone turns them off).
    """
    raw = quota_settings.user_settings()
    if not isinstance(raw, dict) or raw.get("ENABLED", True) is not False:
        return []
    return [
        Warning(
            "QUOTAS['ENABLED'] is False: no quota or rate limit applies to any client (the failed-authentication "
            "limits stay on).",
            hint="Keep ENABLED False for tests only; in a deployment remove it (or set it to True).",
            id="quotas.W005",
        )
    ]


@register(Tags.compatibility)
def check_graphql_complexity(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list[CheckMessage]:
    """quotas.E059: ``GRAPHQL_MAX_COMPLEXITY`` above ``MAX_REQUEST_WEIGHT``. A GraphQL query spends its complexity
    as its weight, so a query the cap admits could still be refused as out of bounds (each setting's own type
    and range is checked with the others)."""
    cap, weight = quota_settings.GRAPHQL_MAX_COMPLEXITY, quota_settings.MAX_REQUEST_WEIGHT
    numbers = all(isinstance(v, int) and not isinstance(v, bool) for v in (cap, weight))
    if not numbers or cap <= weight:
        return []
    return [
        error(
            f"QUOTAS['GRAPHQL_MAX_COMPLEXITY'] = {cap} is above QUOTAS['MAX_REQUEST_WEIGHT'] = {weight}: a query "
            "the cap admits would be refused as out of bounds (its complexity is its weight).",
            "Lower GRAPHQL_MAX_COMPLEXITY, or raise MAX_REQUEST_WEIGHT to at least the same.",
            59,
        )
    ]


@register(Tags.compatibility)
def check_country_database(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list[CheckMessage]:
    """quotas.E081: ``GEOIP_COUNTRY_DB`` set, and geoip2 missing or the file not a readable Country or City
    database. It opens a local file (no connection), closed again at once."""
    path = quota_settings.GEOIP_COUNTRY_DB
    if not path or not isinstance(path, str | PathLike):  # unset, or of the wrong type (E080)
        return []
    found = open_database(path)
    if found.reader is not None:
        found.reader.close()
        return []
    return [
        error(
            f"QUOTAS['GEOIP_COUNTRY_DB']: {found.problem}; limits kept to some countries would apply to no request.",
            "pip install 'django-quota-platform[geoip]' and point it at a GeoLite2 or GeoIP2 Country or City "
            ".mmdb file this process can read (MaxMind's geoipupdate keeps one fresh).",
            81,
        )
    ]


@register(Tags.database)
def check_country_limits_have_a_database(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list:
    """quotas.W082: a limit is kept to some countries, and no usable country database tells them apart.

    A database check (``migrate``, ``check --database default``): the limits are rows. A warning rather than an
    error because those rows are edited in the admin at run time: an error would stop ``migrate`` in a deploy
    over an operator's limit, while the request path already copes (the limit applies to nobody, logged once
    and counted). A misconfigured path is E081's error in every check run.
    """
    backend_path = quota_settings.RULES_BACKEND
    if not backend_path or not kwargs.get("databases"):
        return []
    try:
        rules = import_string(backend_path)().load()
    except (ImportError, DatabaseError):  # not importable (E004 says so) or not migrated yet
        return []
    named = sorted(
        f"{plan.slug}:{rule.name}" for plan in rules.plans.values() for rule in plan.limits if rule.countries
    )
    if not named:
        return []
    found = open_database(quota_settings.GEOIP_COUNTRY_DB)
    if found.reader is not None:
        found.reader.close()
        return []
    return [
        Warning(
            f"Limits kept to some countries ({', '.join(named)}) apply to no request: {found.problem}.",
            hint="Set QUOTAS['GEOIP_COUNTRY_DB'] to a GeoLite2 or GeoIP2 Country or City .mmdb file (pip install "
            "'django-quota-platform[geoip]'), or clear the limits' countries.",
            id="quotas.W082",
        )
    ]
