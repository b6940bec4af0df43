"""System checks for ``settings.QUOTAS`` (ids quotas.E0xx / quotas.W0xx).

None of them opens a connection: they run at every manage.py start.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register
from django.db import DatabaseError
from django.utils.module_loading import import_string

from quotas.conf import ALGORITHMS, DEFAULTS, FAILURE_MODES, quota_settings
from quotas.conf_checks import (
    check_denial_rate_alert,
    check_refusals_anonymous_per_hour,
    check_sections,
    check_shaping_client_share,
    check_usage_api_rate,
    unknown_settings,
)
from quotas.engine.redis_connect import validate_url
from quotas.exceptions import InvalidRate
from quotas.identity.clients import num_proxies
from quotas.rules.money import to_micros
from quotas.rules.rates import parse_rates

#: The largest MAX_REQUEST_COST, in micro-units: 10**9 currency units (the scripts' doubles are exact to 2**53).
MAX_COST_MICROS = 10**15


def _error(msg: str, hint: str, n: int) -> Error:
    return Error(msg, hint=hint, id=f"quotas.E{n:03d}")


def _check_failed_auth_limits(limits: Any) -> list:
    hint = 'For example {"address": "30/10min", "username": "10/15min", "device": "10/15min"}; None turns one off.'
    if limits is None:
        return []
    if not isinstance(limits, dict) or set(limits) - {"address", "username", "device"}:
        message = f"QUOTAS['FAILED_AUTH_LIMITS'] = {limits!r} must map 'address'/'username'/'device' to rates."
        return [_error(message, hint, 18)]
    errors = []
    for kind, rate in limits.items():
        if rate is None:
            continue
        try:
            parse_rates(rate)
        except (InvalidRate, TypeError, ValueError) as exc:
            errors.append(_error(f"QUOTAS['FAILED_AUTH_LIMITS'][{kind!r}] = {rate!r} is not a rate: {exc}", hint, 18))
    return errors


@register(Tags.compatibility)
def check_settings(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list:
    """Validate every QUOTAS setting."""
    raw = quota_settings.user_settings()
    if not isinstance(raw, dict):
        return [_error("QUOTAS must be a dict.", "Set QUOTAS = {...} in your settings.", 1)]
    errors: list = unknown_settings("QUOTAS", raw, DEFAULTS, "quotas.W001")
    s = quota_settings

    url = s.REDIS_URL
    problem = validate_url(url) if isinstance(url, str) else "it is not a string"
    if problem:
        # The message never repeats the URL: it may hold a password.
        errors.append(
            _error(
                f"QUOTAS['REDIS_URL'] is not usable: {problem}.",
                "Use redis://host:6379/0 (rediss:// for TLS, unix:///path.sock), "
                "redis+sentinel://s1:26379,s2:26379/mymaster or redis+cluster://n1:7000,n2:7000.",
                2,
            )
        )
    if not isinstance(s.KEY_PREFIX, str) or not s.KEY_PREFIX or any(c in s.KEY_PREFIX for c in "{} "):
        errors.append(
            _error(
                f"QUOTAS['KEY_PREFIX'] = {s.KEY_PREFIX!r} is not usable.",
                "Use a short non-empty string without braces or spaces, e.g. 'quota:v1'.",
                3,
            )
        )
    if s.RULES_BACKEND is not None:
        try:
            import_string(s.RULES_BACKEND)
        except ImportError as exc:
            errors.append(
                _error(
                    f"QUOTAS['RULES_BACKEND'] = {s.RULES_BACKEND!r} cannot be imported: {exc}.",
                    "Use a dotted path such as 'plans.rules.PlansRulesBackend', or None for DRF's rates.",
                    4,
                )
            )
    for name in (
        "RULES_CHECK_INTERVAL", "SOCKET_TIMEOUT", "CONNECT_TIMEOUT", "PROBE_INTERVAL", "MAX_DELAY_CAP",
        "SHAPING_DELAY_BUDGET", "SHAPING_DELAY_SHARE",
    ):  # fmt: skip
        value = getattr(s, name)
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            errors.append(
                _error(
                    f"QUOTAS[{name!r}] = {value!r} must be a number of seconds >= 0.",
                    f"Default: {DEFAULTS[name]}.",
                    5,
                )
            )
    buckets = s.KEY_BUCKETS
    if isinstance(buckets, bool) or not isinstance(buckets, int) or not 1 <= buckets <= 1 << 24:
        errors.append(
            _error(
                f"QUOTAS['KEY_BUCKETS'] = {buckets!r} must be an int from 1 to 16777216.",
                "Default: 1024. More buckets cost less CPU per decision and more memory per client.",
                14,
            )
        )
    for name in ("LOCAL_DENY_CACHE_SIZE", "CLIENT_CACHE_SIZE"):
        value = getattr(s, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            errors.append(
                _error(f"QUOTAS[{name!r}] = {value!r} must be an int >= 1.", f"Default: {DEFAULTS[name]}.", 6)
            )
    proxies = s.TRUSTED_PROXIES
    if isinstance(proxies, str) or not isinstance(proxies, list | tuple):
        errors.append(
            _error(
                "QUOTAS['TRUSTED_PROXIES'] must be a list of CIDRs.",
                "For example ['10.0.0.0/8', '::1/128'].",
                7,
            )
        )
    else:
        for cidr in proxies:
            if cidr == "unix":  # a proxy on a Unix socket (quotas/identity/clients.py)
                continue
            try:
                ipaddress.ip_network(cidr, strict=False)
            except (TypeError, ValueError):
                errors.append(
                    _error(
                        f"QUOTAS['TRUSTED_PROXIES'] holds {cidr!r}, which is not an IP network.",
                        "Write each proxy as an address or CIDR, e.g. '10.0.0.5' or '10.0.0.0/8', "
                        "or 'unix' for a proxy on a Unix socket.",
                        7,
                    )
                )
    share = s.LOCAL_SHARE
    if isinstance(share, bool) or not isinstance(share, int | float) or not 0 < share <= 1:
        errors.append(
            _error(
                f"QUOTAS['LOCAL_SHARE'] = {share!r} must be a fraction in (0, 1].",
                "Use about 1 / the number of worker processes, e.g. 0.25 for 4 gunicorn workers.",
                13,
            )
        )
    prefix = s.IPV6_PREFIX_LENGTH
    if isinstance(prefix, bool) or not isinstance(prefix, int) or not 1 <= prefix <= 128:
        errors.append(_error(f"QUOTAS['IPV6_PREFIX_LENGTH'] = {prefix!r} must be 1..128.", "Default: 64.", 8))
    if s.FAILURE_MODE not in FAILURE_MODES:
        errors.append(
            _error(
                f"QUOTAS['FAILURE_MODE'] = {s.FAILURE_MODE!r} is not a failure mode.",
                f"Choose one of: {', '.join(FAILURE_MODES)}.",
                10,
            )
        )
    try:
        ZoneInfo(str(s.BUDGET_TIME_ZONE))
    except (ZoneInfoNotFoundError, ValueError):
        errors.append(
            _error(
                f"QUOTAS['BUDGET_TIME_ZONE'] = {s.BUDGET_TIME_ZONE!r} is not a time zone.",
                "Use an IANA name such as 'UTC' or 'Europe/Berlin'.",
                12,
            )
        )
    weight = s.MAX_REQUEST_WEIGHT
    if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 10**12:
        errors.append(
            _error(
                f"QUOTAS['MAX_REQUEST_WEIGHT'] = {weight!r} must be an int from 1 to 10**12.", "Default: 1000000.", 16
            )
        )
    try:
        # Lua's numbers are doubles: micro-units stay exact, and are written as integers, up to 2**53.
        cost_ok = 0 < to_micros(s.MAX_REQUEST_COST) <= MAX_COST_MICROS
    except (TypeError, ArithmeticError, ValueError):
        cost_ok = False
    if not cost_ok:
        errors.append(
            _error(
                f"QUOTAS['MAX_REQUEST_COST'] = {s.MAX_REQUEST_COST!r} must be a positive amount up to 10**9.",
                "Give a Decimal, int or str in currency units. Default: 1000000.",
                17,
            )
        )
    errors += _check_failed_auth_limits(s.FAILED_AUTH_LIMITS)
    errors += check_sections(raw)
    errors += check_denial_rate_alert()
    errors += check_shaping_client_share()
    errors += check_refusals_anonymous_per_hour()
    errors += check_usage_api_rate()
    header = s.API_KEY_HEADER
    if not isinstance(header, str) or not header or not all(c.isalnum() or c == "-" for c in header):
        errors.append(
            _error(f"QUOTAS['API_KEY_HEADER'] = {header!r} is not a header name.", "Default: 'X-API-Key'.", 11)
        )
    return errors


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
    installed = {"quotas.middleware.QuotaHeadersMiddleware", "quotas.http.middleware.QuotaHeadersMiddleware"}
    if _uses_quota_throttle(drf) and not installed & set(settings.MIDDLEWARE):
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


# DRF fidelity (issue 16). Ids from 30 up, apart from the settings checks above.


@register(Tags.compatibility)
def check_drf_algorithm(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list:
    """QUOTAS['DRF_ALGORITHM'] must name an algorithm."""
    algorithm = quota_settings.DRF_ALGORITHM
    if algorithm in ALGORITHMS:
        return []
    return [
        _error(
            f"QUOTAS['DRF_ALGORITHM'] = {algorithm!r} is not an algorithm.",
            f"Default: 'sliding_window_log' (DRF's own meaning of a rate). Choose one of: {', '.join(ALGORITHMS)}.",
            30,
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
    with none, DRF's rates apply to them (quotas.service). A database
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
            hint="Mark a plan as the default (is_default) in the admin, or set "
            "REST_FRAMEWORK['DEFAULT_THROTTLE_RATES'] for 'anon' and 'user'.",
            id="quotas.W032",
        )
    ]


@register(Tags.compatibility)
def check_path_limits(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list:
    """QUOTAS['PATH_LIMITS'] (quotas.django.middleware): a list of {"prefix", "scope", "rate"?, "algorithm"?}."""
    limits = quota_settings.PATH_LIMITS
    hint = 'A list of {"prefix": "/hooks/", "scope": "webhook", "rate": "100/min"} ("rate", "algorithm" optional).'
    if not isinstance(limits, list | tuple):
        return [Error(f"QUOTAS['PATH_LIMITS'] must be a list, not {limits!r}.", hint=hint, id="quotas.E040")]
    errors: list = []
    for n, entry in enumerate(limits):
        problem = _path_limit_problem(entry)
        if problem:
            errors.append(Error(f"QUOTAS['PATH_LIMITS'][{n}] {problem}", hint=hint, id="quotas.E040"))
    return errors


def _path_limit_problem(entry: Any) -> str:
    """What is wrong with one PATH_LIMITS entry ("" when nothing)."""
    if not isinstance(entry, dict):
        return f"must be a dict, not {entry!r}."
    unknown = set(entry) - {"prefix", "scope", "rate", "algorithm"}
    if unknown:
        return f"has unknown key(s) {sorted(unknown)}."
    prefix, scope = entry.get("prefix"), entry.get("scope", "")
    if not isinstance(prefix, str) or not prefix.startswith("/"):
        return f"needs a 'prefix' that is a path starting with '/', not {prefix!r}."
    if not isinstance(scope, str):
        return f"has a 'scope' that is not a string: {scope!r}."
    rate = entry.get("rate")
    if rate is not None:
        try:
            parse_rates(rate)
        except (InvalidRate, TypeError, AttributeError) as exc:
            return f"has a bad 'rate' {rate!r}: {exc}"
    algorithm = entry.get("algorithm")
    if algorithm is not None and algorithm not in ALGORITHMS:
        return f"has an unknown 'algorithm' {algorithm!r} (one of {', '.join(ALGORITHMS)})."
    return ""


#: RFC 3986 characters a URI reference may hold as they are (the rest must be %-encoded).
_URI_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~:/?#[]@!$&'()*+,;=%")


@register(Tags.compatibility)
def check_problem_type_base(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list:
    """QUOTAS['PROBLEM_TYPE_BASE']: an absolute URI or a path from the root, ending so a slug can follow."""
    base = quota_settings.PROBLEM_TYPE_BASE
    hint = "An absolute URI ('https://docs.example.com/problems/') or a path ('/problems/'). Default: '/problems/'."
    if not isinstance(base, str) or not base or not set(base) <= _URI_CHARS:
        return [Error(f"QUOTAS['PROBLEM_TYPE_BASE'] = {base!r} is not a URI reference.", hint=hint, id="quotas.E045")]
    scheme = base.split(":", 1)[0] if ":" in base.split("/", 1)[0] else ""
    if not (scheme[:1].isalpha() or base.startswith("/")) or base.startswith("//"):
        # A relative reference other than a full path resolves differently from every request path (RFC 9457 3.1.1).
        return [
            Error(
                f"QUOTAS['PROBLEM_TYPE_BASE'] = {base!r} is neither an absolute URI nor a path from the root.",
                hint=hint,
                id="quotas.E045",
            )
        ]
    if base[-1] not in "/#:=-_":
        return [
            Error(
                f"QUOTAS['PROBLEM_TYPE_BASE'] = {base!r} would run into the type's name ({base}forbidden).",
                hint="End it with '/', '#' or ':'.",
                id="quotas.E045",
            )
        ]
    if base.lower().startswith("urn:quotas:"):
        return [
            Warning(
                f"QUOTAS['PROBLEM_TYPE_BASE'] = {base!r} is in the URN namespace 'quotas', which is not registered.",
                hint="Use an https:// URL of your documentation, or the default '/problems/'.",
                id="quotas.W045",
            )
        ]
    return []
