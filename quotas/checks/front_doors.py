"""The system checks of the front doors' wiring: DRF's rates and classes beside ``QuotaThrottle``, the
middleware that settles and answers sign-ins, proxies counted alike by DRF and the engine, and clients no rate
covers. Ids from 30 up are DRF fidelity. They read settings (and, for the database checks, the rules), never
DRF itself: a project without DRF runs them too."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.apps import apps
from django.conf import settings
from django.core.checks import Tags, Warning, register
from django.db import DatabaseError
from django.utils.module_loading import import_string

from quotas.checks.engine import error
from quotas.exceptions import InvalidRate
from quotas.formats.rates import parse_rates
from quotas.http.context import SETTLING_MIDDLEWARE
from quotas.http.sign_in import SIGN_IN_MIDDLEWARE
from quotas.identity.addresses import num_proxies
from quotas.settings import quota_settings

API_KEY_AUTHENTICATION = "quotas.drf.authentication.APIKeyAuthentication"


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
                error(
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
