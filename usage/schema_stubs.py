"""Stand-ins for drf-spectacular's annotations when the ``[openapi]`` extra is not installed.

The usage views answer exactly the same without drf-spectacular; only their
OpenAPI description needs it. These names accept what the real ones accept
and do nothing, so ``usage`` installs with the core dependencies alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


class OpenApiTypes:
    """The few type names the usage views mention."""

    STR = "string"
    DATE = "date"


class OpenApiParameter:
    """A parameter description, ignored."""

    HEADER = "header"
    QUERY = "query"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass


class OpenApiResponse(OpenApiParameter):
    """A response description, ignored."""


def inline_serializer(*args: Any, **kwargs: Any) -> None:
    """No serializer is needed where nothing reads the schema."""
    return None


def extend_schema(*args: Any, **kwargs: Any) -> Callable[[F], F]:
    """Leaves the view method as it is."""
    return lambda view: view
