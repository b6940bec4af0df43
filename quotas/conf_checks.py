"""Checks of the nested sections of ``QUOTAS``, of the dashboard's alert,
and of the abuse limits (the shaping share per client, anonymous refusal records, the usage API's rate).

Called by :func:`quotas.checks.check_settings` (ids quotas.W001, E015, E034 to E036,
E046 to E049); kept apart so each module stays one concern. None opens a connection.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

from django.core.checks import Error, Warning

from quotas.conf import DEFAULTS, SECTIONS, quota_settings
from quotas.exceptions import InvalidRate
from quotas.rules.rates import parse_rates


def _error(msg: str, hint: str, n: int) -> Error:
    return Error(msg, hint=hint, id=f"quotas.E{n:03d}")


def unknown_settings(namespace: str, raw: dict, known: Iterable[str], check_id: str) -> list:
    """A warning, with a "did you mean", for each key of a settings dict that is not a known setting."""
    known = list(known)
    warnings = []
    for name in raw:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"Did you mean {close[0]!r}?" if close else f"Known settings: {', '.join(sorted(known))}."
            warnings.append(Warning(f"Unknown setting {namespace}[{name!r}] is ignored.", hint=hint, id=check_id))
    return warnings


def check_sections(raw: dict[str, Any]) -> list:
    """QUOTAS['METRICS'] and QUOTAS['USAGE_FLUSH']: dicts of known keys, each of the right type."""
    errors: list = []
    for section in SECTIONS:
        given = raw.get(section)
        if given is None:
            continue
        if not isinstance(given, dict):
            keys = ", ".join(f"{k!r}: ..." for k in DEFAULTS[section])
            errors.append(_error(f"QUOTAS[{section!r}] = {given!r} must be a dict.", f"For example {{{keys}}}.", 34))
            continue
        errors += unknown_settings(f"QUOTAS[{section!r}]", given, DEFAULTS[section], "quotas.W001")
    metrics, flush = quota_settings.METRICS, quota_settings.USAGE_FLUSH
    if not isinstance(metrics["TOKEN"], str):
        errors.append(
            _error(
                "QUOTAS['METRICS']['TOKEN'] must be a string.",  # never the value: it is a secret
                "Read it from the environment, e.g. os.environ.get('METRICS_TOKEN', ''); '' means no token.",
                35,
            )
        )
    if not isinstance(metrics["ALLOW_LOOPBACK"], bool):
        errors.append(
            _error(
                f"QUOTAS['METRICS']['ALLOW_LOOPBACK'] = {metrics['ALLOW_LOOPBACK']!r} must be True or False.",
                "Default: False (/metrics needs QUOTAS['METRICS']['TOKEN'] or a staff session).",
                15,
            )
        )
    size, delay = flush["BATCH_SIZE"], flush["BATCH_DELAY"]
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        errors.append(
            _error(f"QUOTAS['USAGE_FLUSH']['BATCH_SIZE'] = {size!r} must be an int >= 1.", "Default: 500.", 36)
        )
    if isinstance(delay, bool) or not isinstance(delay, int | float) or delay < 0:
        errors.append(
            _error(
                f"QUOTAS['USAGE_FLUSH']['BATCH_DELAY'] = {delay!r} must be a number of seconds >= 0.",
                "Default: 0.0 (a test hook; leave it at 0 in production).",
                36,
            )
        )
    return errors


def check_denial_rate_alert() -> list:
    """QUOTAS['DENIAL_RATE_ALERT']: a fraction from 0 to 1 (the dashboard's denial-rate alert line)."""
    value = quota_settings.DENIAL_RATE_ALERT
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        return [
            _error(
                f"QUOTAS['DENIAL_RATE_ALERT'] = {value!r} must be a fraction from 0 to 1.",
                "Default: 0.1 (alert when more than 10 % of a plan's or scope's requests are refused).",
                46,
            )
        ]
    return []


def check_shaping_client_share() -> list:
    """QUOTAS['SHAPING_CLIENT_SHARE']: a fraction in (0, 1] of the process's shaping budget per client."""
    value = quota_settings.SHAPING_CLIENT_SHARE
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        return [
            _error(
                f"QUOTAS['SHAPING_CLIENT_SHARE'] = {value!r} must be a fraction in (0, 1].",
                "Default: 0.5 (one client may hold at most half of SHAPING_DELAY_BUDGET); 1 turns the share off.",
                47,
            )
        ]
    return []


def check_refusals_anonymous_per_hour() -> list:
    """QUOTAS['REFUSALS_ANONYMOUS_PER_HOUR']: how many anonymous clients' refusals a process records an hour."""
    value = quota_settings.REFUSALS_ANONYMOUS_PER_HOUR
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return [
            _error(
                f"QUOTAS['REFUSALS_ANONYMOUS_PER_HOUR'] = {value!r} must be an int >= 0.",
                "Default: 1000 anonymous clients per process per hour; 0 records no anonymous refusal.",
                48,
            )
        ]
    return []


def check_usage_api_rate() -> list:
    """QUOTAS['USAGE_API_RATE']: a rate, or None for no default limit on the usage API."""
    rate = quota_settings.USAGE_API_RATE
    if rate is None:
        return []
    try:
        parse_rates(rate)
    except (InvalidRate, TypeError, AttributeError, ValueError) as exc:
        return [
            _error(
                f"QUOTAS['USAGE_API_RATE'] = {rate!r} is not a rate: {exc}",
                "Default: '120/min' per client; None leaves the usage API to the plans' 'usage_api' limits alone.",
                49,
            )
        ]
    return []
