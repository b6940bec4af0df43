"""The QUOTAS settings' checks beyond a type and a range, each named in its setting's description.

See :data:`quotas.settings.setting.Validator`: each gets a value of the described type
and the setting's name as messages write it, and yields what is wrong. None
opens a connection (the checks run at every ``manage.py`` start).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.core.checks import CheckMessage, Warning
from django.utils.module_loading import import_string

from quotas.contract.protocol import Algorithm
from quotas.exceptions import InvalidRate
from quotas.formats.money import to_micros
from quotas.formats.rates import parse_rates
from quotas.formats.store_urls import validate_url

#: The algorithms a limit may name (periods and budgets have models of their own).
ALGORITHMS = tuple(a.setting_name for a in Algorithm if a.rolling or a is Algorithm.CONCURRENCY)
#: The largest MAX_REQUEST_COST, in micro-units: 10**9 currency units (the scripts' doubles are exact to 2**53).
MAX_COST_MICROS = 10**15
#: The kinds of failed authentication FAILED_AUTH_LIMITS may limit (quotas/identity/auth_failures.py).
AUTH_FAILURE_KINDS = ("address", "username", "device")
#: RFC 3986 characters a URI reference may hold as they are (the rest must be %-encoded).
_URI_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~:/?#[]@!$&'()*+,;=%")

Found = Iterator[str | CheckMessage]


def redis_url(url: str, label: str) -> Found:
    problem = validate_url(url)
    if problem:
        yield f"{label} is not usable: {problem}."  # never the URL: it may hold a password


def key_prefix(prefix: str, label: str) -> Found:
    if not prefix or any(c in prefix for c in "{} "):
        yield f"{label} = {prefix!r} is not usable: it must be non-empty, without braces or spaces."


def importable(path: str | None, label: str) -> Found:
    if path is None:
        return
    try:
        import_string(path)
    except ImportError as exc:
        yield f"{label} = {path!r} cannot be imported: {exc}."


def ip_networks(proxies: list[Any] | tuple[Any, ...], label: str) -> Found:
    for cidr in proxies:
        if cidr == "unix":  # a proxy on a Unix socket (quotas/identity/clients.py)
            continue
        try:
            ipaddress.ip_network(cidr, strict=False)
        except (TypeError, ValueError):
            yield f"{label} holds {cidr!r}, which is not an IP network."


def prefixes(values: list[Any] | tuple[Any, ...], label: str) -> Found:
    for value in values:
        if not isinstance(value, str) or not value:
            yield f"{label} holds {value!r}, which is not a non-empty string."


def header_name(header: str, label: str) -> Found:
    if not header or not all(c.isalnum() or c == "-" for c in header):
        yield f"{label} = {header!r} is not a header name."


def time_zone(name: str, label: str) -> Found:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        yield f"{label} = {name!r} is not a time zone."


def request_cost(amount: Any, label: str) -> Found:
    try:
        # Lua's numbers are doubles: micro-units stay exact, and are written as integers, up to 2**53.
        fits = 0 < to_micros(amount) <= MAX_COST_MICROS
    except (ArithmeticError, ValueError):  # decimal.InvalidOperation is an ArithmeticError
        fits = False
    if not fits:
        yield f"{label} = {amount!r} must be a positive amount up to 10**9."


def rate(text: Any, label: str) -> Found:
    """A rate string ("120/min; 2000/hour"), or None."""
    if text is None:
        return
    try:
        parse_rates(text)
    except (InvalidRate, ValueError) as exc:
        yield f"{label} = {text!r} is not a rate: {exc}"


def auth_failure_limits(limits: dict[Any, Any] | None, label: str) -> Found:
    if limits is None:
        return
    unknown = sorted(map(repr, set(limits) - set(AUTH_FAILURE_KINDS)))
    if unknown:
        yield f"{label} names {', '.join(unknown)}: its keys are {', '.join(map(repr, AUTH_FAILURE_KINDS))}."
        return
    for kind, text in limits.items():
        yield from rate(text, f"{label}[{kind!r}]")


def path_limits(limits: list[Any] | tuple[Any, ...], label: str) -> Found:
    for n, entry in enumerate(limits):
        problem = _path_limit_problem(entry)
        if problem:
            yield f"{label}[{n}] {problem}"


def _path_limit_problem(entry: Any) -> str:
    """What is wrong with one PATH_LIMITS entry ("" when nothing)."""
    if not isinstance(entry, dict):
        return f"must be a dict, not {entry!r}."
    unknown = set(entry) - {"prefix", "scope", "rate", "algorithm"}
    if unknown:
        return f"has unknown key(s) {sorted(map(str, unknown))}."
    prefix, scope = entry.get("prefix"), entry.get("scope", "")
    if not isinstance(prefix, str) or not prefix.startswith("/"):
        return f"needs a 'prefix' that is a path starting with '/', not {prefix!r}."
    if not isinstance(scope, str):
        return f"has a 'scope' that is not a string: {scope!r}."
    return _path_limit_rate_problem(entry)


def _path_limit_rate_problem(entry: dict[str, Any]) -> str:
    """What is wrong with a PATH_LIMITS entry's rate and algorithm ("" when nothing)."""
    text = entry.get("rate")
    if text is not None:
        try:
            parse_rates(text)
        except (InvalidRate, TypeError, AttributeError, ValueError) as exc:
            return f"has a bad 'rate' {text!r}: {exc}"
    algorithm = entry.get("algorithm")
    if algorithm is not None and algorithm not in ALGORITHMS:
        return f"has an unknown 'algorithm' {algorithm!r} (one of {', '.join(ALGORITHMS)})."
    return ""


def problem_type_base(base: str, label: str) -> Found:
    """An absolute URI or a path from the root, ending so that a slug can follow."""
    if not base or not set(base) <= _URI_CHARS:
        yield f"{label} = {base!r} is not a URI reference."
        return
    scheme = base.split(":", 1)[0] if ":" in base.split("/", 1)[0] else ""
    if not (scheme[:1].isalpha() or base.startswith("/")) or base.startswith("//"):
        # A relative reference other than a full path resolves differently from every request path (RFC 9457 3.1.1).
        yield f"{label} = {base!r} is neither an absolute URI nor a path from the root."
    elif base[-1] not in "/#:=-_":
        yield f"{label} = {base!r} would run into the type's name ({base}forbidden): end it with '/', '#' or ':'."
    elif base.lower().startswith("urn:quotas:"):
        yield Warning(
            f"{label} = {base!r} is in the URN namespace 'quotas', which is not registered.",
            hint="Use an https:// URL of your documentation, or the default '/problems/'.",
            id="quotas.W045",
        )
