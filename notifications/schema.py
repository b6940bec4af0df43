"""The notifications API's OpenAPI description (drf-spectacular), applied only when drf-spectacular is installed
(the ``[openapi]`` extra), as the usage API's is."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def documented(view: F) -> F:
    """``extend_schema`` of ``GET /api/v1/notifications``, or ``view`` unchanged without drf-spectacular."""
    try:
        from drf_spectacular.utils import extend_schema
    except ImportError:
        return view
    from quotas.openapi import PROBLEM_MEDIA_TYPE, problem

    from .serializers import NotificationsSerializer

    return extend_schema(
        operation_id="notifications_list",
        summary="The caller's webhook endpoints and latest deliveries",
        description="Called with a subscription's API key (or by its signed-in user); never shows a secret.",
        responses={
            200: NotificationsSerializer,
            (401, PROBLEM_MEDIA_TYPE): problem("No API key and not signed in, or an invalid API key."),
            (403, PROBLEM_MEDIA_TYPE): problem("A user without a subscription."),
        },
        tags=["notifications"],
    )(view)
