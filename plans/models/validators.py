"""Validators of the plans models' text fields (rates, methods, durations, networks)."""

from __future__ import annotations

from django.core.exceptions import ValidationError

from quotas.exceptions import InvalidRate
from quotas.formats.acl import parse_network
from quotas.formats.rates import parse_rates

HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def validate_rates(value: str) -> None:
    """Model validator for a rate string such as '10/s; 100/min'."""
    try:
        parse_rates(value)
    except InvalidRate as exc:
        raise ValidationError(str(exc), code="invalid_rate") from exc


def validate_methods(value: str) -> None:
    """Model validator for a comma-separated list of HTTP methods."""
    unknown = [m for m in _split_methods(value) if m not in HTTP_METHODS]
    if unknown:
        raise ValidationError(
            f"Unknown HTTP method(s): {', '.join(unknown)}. Use any of {', '.join(HTTP_METHODS)}.",
            code="invalid_method",
        )


def validate_durations(value: str) -> None:
    """Model validator for escalating ban durations such as '60,600,3600'."""
    parts = [p.strip() for p in value.split(",")]
    if not parts or not all(p.isdigit() and 0 < int(p) <= 30 * 86400 for p in parts):
        raise ValidationError(
            "Give ban lengths in seconds separated by commas, each from 1 to 2592000 (30 days), e.g. 60,600,3600.",
            code="invalid_durations",
        )


def parse_durations(value: str) -> tuple[int, ...]:
    return tuple(int(p) for p in value.split(",") if p.strip().isdigit())


def _split_methods(value: str) -> list[str]:
    return [m.strip().upper() for m in value.replace(";", ",").split(",") if m.strip()]


def validate_cidr(value: str) -> None:
    """Model validator for an IPv4 or IPv6 address or network."""
    try:
        parse_network(value)
    except ValueError as exc:
        raise ValidationError(
            f"'{value}' is not an IPv4 or IPv6 address or network; write e.g. 203.0.113.7, 203.0.113.0/24 "
            "or 2001:db8::/32.",
            code="invalid_cidr",
        ) from exc
