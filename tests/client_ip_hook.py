"""A project's own client-address function, as QUOTAS['CLIENT_IP'] names one (django-ipware's shape)."""

from __future__ import annotations

from django.http import HttpRequest


def from_header(request: HttpRequest) -> str | None:
    """The address the (test) edge proxy wrote in X-Client, or None."""
    return request.META.get("HTTP_X_CLIENT")
