"""The OpenAPI description of the console's answers that drf-spectacular cannot infer, applied only when it is
installed (the optional ``[openapi]`` extra, as :mod:`usage.schema` does): a POST that queues work answers 202,
not the 200 a plain POST is assumed to."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def queued(body: type, description: str, conflict: str, poll: bool = False) -> Callable[[F], F]:
    """The schema decorator of a POST that queues work: ``202`` with ``body`` (``description``), and ``409``
    problem+json when ``conflict`` holds; ``poll``: the answer's ``Location`` says where to read it."""
    try:
        from drf_spectacular.types import OpenApiTypes
        from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
    except ImportError:
        return lambda view: view
    from quotas.openapi import PROBLEM_MEDIA_TYPE, problem

    location = OpenApiParameter(
        "Location", OpenApiTypes.STR, OpenApiParameter.HEADER, response=[202],
        description="The delivery's URL: GET it until its status is no longer pending.",
    )  # fmt: skip
    return extend_schema(
        request=None,
        responses={202: OpenApiResponse(body, description=description), (409, PROBLEM_MEDIA_TYPE): problem(conflict)},
        parameters=[location] if poll else None,
    )
