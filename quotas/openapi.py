"""OpenAPI for drf-spectacular: what a throttled operation may answer, and the API-key scheme.

drf-spectacular is optional (the ``[openapi]`` extra): this is the only
module of ``quotas`` that imports it, and nothing in ``quotas`` imports this
module except :meth:`quotas.apps.QuotasConfig.ready`, when ``drf_spectacular``
is installed. Use it with::

    REST_FRAMEWORK = {"DEFAULT_SCHEMA_CLASS": "quotas.openapi.QuotaAutoSchema", ...}

Then every operation whose ``throttle_classes`` include
:class:`~quotas.drf.throttling.QuotaThrottle` documents:

- ``429`` with an ``application/problem+json`` body (the ``Problem`` component)
  and a ``Retry-After`` header;
- ``503`` the same way, where the quota layer may answer it: with the
  ``adaptive`` app installed (limits reduced under load) or with
  ``QUOTAS['FAILURE_MODE'] = "closed"`` (Redis unreachable);
- the ``RateLimit`` and ``RateLimit-Policy`` headers on each of its responses.

:class:`APIKeyScheme` describes
:class:`~quotas.drf.authentication.APIKeyAuthentication` as an ``apiKey``
security scheme in the header ``QUOTAS['API_KEY_HEADER']``; it is registered
when this module is imported, whichever schema class the project uses.
"""

from __future__ import annotations

from typing import Any

from django.apps import apps
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import Direction, OpenApiParameter, OpenApiResponse
from rest_framework import serializers

from quotas.drf.throttling import QuotaThrottle
from quotas.problems import CONTENT_TYPE
from quotas.settings import quota_settings

#: The media type of every quota error body.
PROBLEM_MEDIA_TYPE = CONTENT_TYPE


class ProblemSerializer(serializers.Serializer):
    """An RFC 9457 problem details body: the ``Problem`` component of the schema.

    The quota layer adds members of its own (``reason``, ``limit``,
    ``retry_after``, ...); ``additionalProperties`` stays open for them.
    """

    type = serializers.CharField(help_text="A URI naming the kind of problem.")
    title = serializers.CharField(help_text="A short summary of the kind of problem.")
    status = serializers.IntegerField(help_text="The HTTP status code.")
    detail = serializers.CharField(help_text="What went wrong with this request, for a human.")
    reason = serializers.CharField(required=False, help_text="A stable machine-readable reason.")
    retry_after = serializers.IntegerField(required=False, help_text="Seconds to wait, as in Retry-After.")
    # The metaclass takes declared fields off the class, so this does not hide Serializer.errors.
    errors = serializers.DictField(  # type: ignore[assignment]  # a field, not Serializer.errors (see above)
        child=serializers.CharField(), required=False, help_text="Per-parameter messages of a 400."
    )

    class Meta:
        ref_name = "Problem"


def problem(description: str) -> OpenApiResponse:
    """An ``OpenApiResponse`` with a ``Problem`` body and ``description`` (for ``responses=``).

    Key it by ``(status, PROBLEM_MEDIA_TYPE)`` in ``extend_schema(responses=...)``
    so the body is documented as ``application/problem+json``.
    """
    return OpenApiResponse(ProblemSerializer, description=description)


#: The headers every response of a throttled operation carries (draft-ietf-httpapi-ratelimit-headers).
RATE_LIMIT_HEADERS = (
    OpenApiParameter(
        "RateLimit-Policy",
        OpenApiTypes.STR,
        OpenApiParameter.HEADER,
        response=True,
        description='The quota policies enforced, e.g. `"search";q=10;w=60` (draft-ietf-httpapi-ratelimit-headers).',
    ),
    OpenApiParameter(
        "RateLimit",
        OpenApiTypes.STR,
        OpenApiParameter.HEADER,
        response=True,
        description='What is left of each policy, e.g. `"search";r=3;t=42`: r units remain, full again in t seconds.',
    ),
)
RETRY_AFTER = OpenApiParameter(
    "Retry-After",
    OpenApiTypes.INT,
    OpenApiParameter.HEADER,
    response=[429, 503],
    description="Seconds to wait before retrying.",
)


def refusals_of(view: Any) -> dict[int, str]:
    """The statuses the quota layer may answer ``view`` with, and why (empty when it is not throttled)."""
    throttles = getattr(view, "get_throttles", None)
    if throttles is None or not any(isinstance(t, QuotaThrottle) for t in throttles()):
        return {}
    refusals = {429: "Too many requests: a limit, budget or ban refused this request (see `reason`)."}
    if apps.is_installed("adaptive") or quota_settings.FAILURE_MODE == "closed":
        refusals[503] = "Limits are reduced under load, or quotas cannot be checked right now; retry later."
    return refusals


class QuotaAutoSchema(AutoSchema):
    """drf-spectacular's AutoSchema, plus the answers and headers of :class:`QuotaThrottle`."""

    def get_override_parameters(self) -> list[Any]:
        """The view's own parameters, plus the rate-limit response headers when it is throttled."""
        parameters = list(super().get_override_parameters())
        if refusals_of(self.view):
            named = {getattr(p, "name", None) for p in parameters}
            parameters += [p for p in (*RATE_LIMIT_HEADERS, RETRY_AFTER) if p.name not in named]
        return parameters

    def _get_response_bodies(self, direction: Direction = "response") -> dict[str, Any]:
        # AutoSchema offers no public hook for adding a status to every operation: this wraps the
        # private method that builds the responses, and lets a view's own 429/503 stand.
        responses: dict[str, Any] = super()._get_response_bodies(direction)
        for status, description in refusals_of(self.view).items():
            if str(status) not in responses:
                responses[str(status)] = self._get_response_for_code(
                    problem(description), str(status), [PROBLEM_MEDIA_TYPE], direction
                )
        return responses


class APIKeyScheme(OpenApiAuthenticationExtension):
    """:class:`~quotas.drf.authentication.APIKeyAuthentication` as an ``apiKey`` security scheme."""

    target_class = "quotas.drf.authentication.APIKeyAuthentication"
    name = "ApiKeyAuth"
    match_subclasses = True

    def get_security_definition(self, auto_schema: AutoSchema) -> dict[str, Any]:
        """``{"type": "apiKey", "in": "header", "name": <QUOTAS['API_KEY_HEADER']>}``."""
        return {
            "type": "apiKey",
            "in": "header",
            "name": quota_settings.API_KEY_HEADER,
            "description": "The API key you were issued. A malformed, unknown, revoked or expired key is a 401.",
        }
