"""System checks for ``settings.QUOTAS`` (ids quotas.E0xx / quotas.W0xx).

Every setting, the engine's and those of each installed app's section, is checked against its description by
one loop (:mod:`quotas.settings.checking`); the checks below it compare QUOTAS with DRF's settings and the
database. None of them opens a connection: they run at every manage.py start.
"""

from __future__ import annotations

from collections.abc import Iterable
from os import PathLike
from typing import Any

from django.apps import apps
from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError
from django.utils.module_loading import import_string

from quotas.contract.urls import is_memory_url
from quotas.exceptions import InvalidRate
from quotas.formats.rates import parse_rates
from quotas.http.context import SETTLING_MIDDLEWARE
from quotas.http.sign_in import SIGN_IN_MIDDLEWARE
from quotas.identity.addresses import num_proxies
from quotas.identity.countries import open_database
from quotas.observability.otel import available as otel_available
from quotas.settings import quota_settings
from quotas.settings.checking import check_quotas
from quotas.store.opening import memory_store_available, memory_store_refused


def _error(msg: str, hint: str, n: int) -> Error:
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
def check_memory_store(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list[CheckMessage]:
    """quotas.E058: ``REDIS_URL = "memory://"`` without ``lupa``, which runs the Lua library in process."""
    if not is_memory_url(quota_settings.REDIS_URL) or memory_store_available():
        return []
    return [
        _error(
            "QUOTAS['REDIS_URL'] names the memory store, which runs the quota scripts in this process with lupa, "
            "and lupa is not installed.",
            "pip install 'django-quota-platform[memory]' (or lupa), or point REDIS_URL at a Redis.",
            58,
        )
    ]


@register(Tags.compatibility)
def check_opentelemetry(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list[CheckMessage]:
    """quotas.E071: ``OPENTELEMETRY`` on without the OpenTelemetry API installed."""
    if not quota_settings.OPENTELEMETRY or otel_available():
        return []
    return [
        _error(
            "QUOTAS['OPENTELEMETRY'] is on, and the OpenTelemetry API (opentelemetry-api) is not installed.",
            "pip install 'django-quota-platform[opentelemetry]', or set QUOTAS['OPENTELEMETRY'] to False.",
            71,
        )
    ]


@register(Tags.compatibility)
def check_memory_store_in_production(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list[CheckMessage]:
    """quotas.E091: ``memory://`` with ``DEBUG`` off, outside tests, unless ``ALLOW_MEMORY_STORE_IN_PRODUCTION``.

    A deployment on it admits N times each limit and budget with N processes, and forgets them on restart.
    """
    if not memory_store_refused(quota_settings.REDIS_URL):  # the condition servers and Celery refuse to start on
        return []
    return [
        _error(
            "QUOTAS['REDIS_URL'] is memory:// with DEBUG off: every process would keep its own counters (N "
            "processes admit N times each limit and budget) and forget them on restart.",
            "Point REDIS_URL at a Redis; memory:// is for tests and DEBUG development (or set "
            "QUOTAS['ALLOW_MEMORY_STORE_IN_PRODUCTION'] = True for one process that may forget).",
            91,
        )
    ]


@register(Tags.compatibility, deploy=True)
def check_memory_store_in_deployment(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list[CheckMessage]:
    """quotas.W006 (``check --deploy``): the memory store counts per process and forgets on restart."""
    if not is_memory_url(quota_settings.REDIS_URL):
        return []
    return [
        Warning(
            "QUOTAS['REDIS_URL'] is memory://: every process keeps its own counters, so N processes admit N times "
            "each limit and budget, and a restart forgets what was spent.",
            hint="Use the memory store for tests and single-process development; point REDIS_URL at a Redis in "
            "production.",
            id="quotas.W006",
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
def check_drf_rates(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list:
    """DRF rates that QuotaThrottle would use in compat mode must parse."""
    rates = (getattr(settings, "REST_FRAMEWORK", {}) or {}).get("DEFAULT_THROTTLE_RATES") or {}
    errors = []
    for scope, rate in rates.items():
        if rate is None:
            continue
        try:
            parse_rates(rate)
        except InvalidRate as exc:
            errors.append(
                _error(
                    f"REST_FRAMEWORK['DEFAULT_THROTTLE_RATES'][{scope!r}]: {exc}",
                    "QuotaThrottle reads these rates when no plan exists.",
                    20,
                )
            )
    return errors


def _uses_quota_throttle(drf: dict[str, Any]) -> bool:
    throttles = drf.get("DEFAULT_THROTTLE_CLASSES") or []
    return any(t.startswith("quotas.") and t.endswith("QuotaThrottle") for t in throttles)


@register(Tags.compatibility)
def check_middleware(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list:
    """QuotaThrottle needs its middleware to send headers and settle decisions after the view."""
    drf = getattr(settings, "REST_FRAMEWORK", {}) or {}
    if _uses_quota_throttle(drf) and SETTLING_MIDDLEWARE.isdisjoint(settings.MIDDLEWARE):
        return [
            Warning(
                "QuotaThrottle is a default throttle but QuotaHeadersMiddleware is not installed: "
                "responses will lack rate-limit headers, and refunds, actual costs and concurrency leases "
                "are never settled.",
                hint="Add 'quotas.middleware.QuotaHeadersMiddleware' to MIDDLEWARE.",
                id="quotas.W002",
            )
        ]
    return []


@register(Tags.compatibility)
def check_sign_in_middleware(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list:
    """quotas.W007: QuotaHeadersMiddleware is installed without SignInThrottleMiddleware, which has done the
    sign-in half of its old job since they were split (settings written before that list only the first)."""
    listed = set(settings.MIDDLEWARE)
    if SETTLING_MIDDLEWARE.isdisjoint(listed) or not SIGN_IN_MIDDLEWARE.isdisjoint(listed):
        return []
    if not apps.is_installed("django.contrib.auth"):  # no sign-ins to refuse or remember
        return []
    return [
        Warning(
            "QuotaHeadersMiddleware is installed but SignInThrottleMiddleware is not: a sign-in refused for too "
            "many failures is answered as a wrong password instead of a 429, and no browser gets the "
            "trusted-device cookie, so a username under attack locks its owner out too.",
            hint="Add 'quotas.middleware.SignInThrottleMiddleware' to MIDDLEWARE, just before "
            "'quotas.middleware.QuotaHeadersMiddleware'.",
            id="quotas.W007",
        )
    ]


API_KEY_AUTHENTICATION = "quotas.drf.authentication.APIKeyAuthentication"


@register(Tags.compatibility)
def check_drf_adapter(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list:
    """With API keys (a rules backend) and QuotaThrottle: the key authentication class should come first."""
    drf = getattr(settings, "REST_FRAMEWORK", {}) or {}
    if not _uses_quota_throttle(drf) or not quota_settings.RULES_BACKEND:
        return []
    classes = list(drf.get("DEFAULT_AUTHENTICATION_CLASSES") or ())
    if classes[:1] == [API_KEY_AUTHENTICATION]:
        return []
    if API_KEY_AUTHENTICATION in classes:
        problem = "is not the first of REST_FRAMEWORK['DEFAULT_AUTHENTICATION_CLASSES']: DRF answers a bad key with 403"
    else:
        problem = (
            "is not in REST_FRAMEWORK['DEFAULT_AUTHENTICATION_CLASSES']: QuotaThrottle checks API keys itself, "
            "request.user is not the key's holder, and DRF may answer a bad key with 403"
        )
    return [
        Warning(
            f"{API_KEY_AUTHENTICATION} {problem}, not 401 with a WWW-Authenticate challenge.",
            hint=f"Put '{API_KEY_AUTHENTICATION}' first in DEFAULT_AUTHENTICATION_CLASSES.",
            id="quotas.W003",
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
        _error(
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
        _error(
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


# DRF fidelity. Ids from 30 up, apart from the settings checks above.


@register(Tags.compatibility)
def check_num_proxies(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list:
    """DRF's NUM_PROXIES and QUOTAS['TRUSTED_PROXIES'] both set, saying different things.

    QuotaThrottle follows TRUSTED_PROXIES when it is set and DRF's NUM_PROXIES
    otherwise. NUM_PROXIES = 0 (DRF believes no X-Forwarded-For) beside trusted
    proxies is a contradiction whatever the traffic; NUM_PROXIES = N beside
    TRUSTED_PROXIES cannot be compared without a request, so it is compared
    on requests instead (quotas.identity.clients logs the first disagreement).
    """
    proxies = num_proxies()
    trusted = quota_settings.TRUSTED_PROXIES
    if proxies != 0 or not trusted or not isinstance(trusted, list | tuple):
        return []
    return [
        Warning(
            "REST_FRAMEWORK['NUM_PROXIES'] = 0 says no proxy's X-Forwarded-For is believed, but "
            f"QUOTAS['TRUSTED_PROXIES'] = {list(trusted)!r} believes it: QuotaThrottle follows TRUSTED_PROXIES, "
            "DRF's own throttles and get_ident() follow NUM_PROXIES, so they count different clients.",
            hint="Set NUM_PROXIES to the number of proxies in front of the app, or empty TRUSTED_PROXIES.",
            id="quotas.W030",
        )
    ]


def _uncovered_kinds() -> list[str]:
    """The kinds of request DRF's default rates leave unthrottled (views without a throttle_scope)."""
    rates = (getattr(settings, "REST_FRAMEWORK", {}) or {}).get("DEFAULT_THROTTLE_RATES") or {}
    kinds = [] if rates.get("anon") or rates.get("user") else ["anonymous"]
    return kinds + ([] if rates.get("user") else ["authenticated"])


@register(Tags.compatibility)
def check_throttle_has_rates(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list:
    """QuotaThrottle installed, no rules backend, and no DRF rate for some kind of request.

    DRF's own throttles raise ImproperlyConfigured there; QuotaThrottle admits
    such requests without limits or headers, so the project is told at start-up.
    (With a rules backend, the default plan may cover them: see
    :func:`check_plans_cover_clients`, which needs the database.)
    """
    drf = getattr(settings, "REST_FRAMEWORK", {}) or {}
    if not _uses_quota_throttle(drf) or quota_settings.RULES_BACKEND:
        return []
    kinds = _uncovered_kinds()
    if not kinds:
        return []
    return [
        Warning(
            f"QuotaThrottle is installed but no rate applies to {' or '.join(kinds)} requests: they are admitted "
            "with no limit and no RateLimit headers (unless the view has a throttle_scope with a rate).",
            hint="Set REST_FRAMEWORK['DEFAULT_THROTTLE_RATES'] = {'anon': '100/hour', 'user': '1000/hour'}, "
            "or QUOTAS['RULES_BACKEND'] = 'plans.rules.PlansRulesBackend' and a default plan.",
            id="quotas.W031",
        )
    ]


@register(Tags.database)
def check_plans_cover_clients(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list:
    """With a rules backend: clients no plan covers, and no DRF rate for them either.

    Anonymous clients and users without a subscription are on the default plan;
    with none, DRF's rates apply to them (quotas.decide). A database
    check: it runs in ``migrate`` and ``check --database default``, not at every start.
    """
    drf = getattr(settings, "REST_FRAMEWORK", {}) or {}
    backend_path = quota_settings.RULES_BACKEND
    if not _uses_quota_throttle(drf) or not backend_path or not kwargs.get("databases"):
        return []
    kinds = _uncovered_kinds()
    if not kinds:
        return []
    try:
        rules = import_string(backend_path)().load()
    except (ImportError, DatabaseError):  # not importable (E004 says so) or not migrated yet
        return []
    if rules.default_plan_id is not None:
        return []
    who = " or ".join("anonymous clients" if k == "anonymous" else "users without a subscription" for k in kinds)
    return [
        Warning(
            f"No default plan and no DRF rate for them: {who} are admitted with no limit and no RateLimit headers.",
            hint="Mark a plan with a limit for every request as the default (is_default) in the admin, or set "
            "REST_FRAMEWORK['DEFAULT_THROTTLE_RATES'] for 'anon' and 'user'.",
            id="quotas.W032",
        )
    ]


def missing_apps(reads: Iterable[str], *, message: str, hint: str, check_id: str) -> list[CheckMessage]:
    """For the platform's apps that read others' models (the dashboard, the console): one Error naming the apps of
    ``reads`` that are not installed (``message: <apps>.``; hint ``Add <apps> to INSTALLED_APPS<hint>``), or none."""
    missing = [app for app in reads if not apps.is_installed(app)]
    if not missing:
        return []
    return [
        Error(
            f"{message}: {', '.join(missing)}.",
            hint=f"Add {', '.join(repr(app) for app in missing)} to INSTALLED_APPS{hint}",
            id=check_id,
        )
    ]


def raise_missing_apps(errors: list[CheckMessage]) -> None:
    """Raise :class:`~django.core.exceptions.ImproperlyConfigured` with the first of ``errors`` (from
    :func:`missing_apps`): for an app's URL modules, before they import its views. Django's own URL checks import
    every URLconf before the app's check gets to report, so without this a project would see the RuntimeError of
    a model import instead."""
    for error in errors:
        raise ImproperlyConfigured(f"{error.msg} {error.hint} ({error.id})")
