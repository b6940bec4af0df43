"""The OpenAPI schema (drf-spectacular): quota refusals, rate-limit headers, the API-key scheme."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from drf_spectacular.validation import validate_schema
from rest_framework.views import APIView

from quotas.openapi import refusals_of

pytestmark = pytest.mark.django_db

PROBLEM_REF = {"$ref": "#/components/schemas/Problem"}


def fetch_schema(client):
    response = client.get("/api/schema/", {"format": "json"}, HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    return response.json()


def test_the_schema_is_valid_openapi(client):
    """The project's schema at /api/schema/ passes drf-spectacular's OpenAPI validation."""
    validate_schema(fetch_schema(client))


def test_usage_errors_are_problem_json(client):
    """Every error of the usage API is an application/problem+json Problem."""
    paths = fetch_schema(client)["paths"]
    report = paths["/api/v1/usage/"]["get"]["responses"]
    current = paths["/api/v1/usage/current"]["get"]["responses"]
    for responses, codes in ((report, ("400", "401", "403")), (current, ("401", "403", "503"))):
        for code in codes:
            assert responses[code]["content"] == {"application/problem+json": {"schema": PROBLEM_REF}}
    assert set(report["200"]["content"]) == {"application/json", "text/csv"}


def test_the_problem_component_describes_rfc_9457(client):
    """One Problem component: type, title, status and detail required, the quota layer's extras optional."""
    problem = fetch_schema(client)["components"]["schemas"]["Problem"]
    assert set(problem["required"]) == {"type", "title", "status", "detail"}
    assert {"reason", "retry_after", "errors"} <= set(problem["properties"])


def test_a_throttled_operation_documents_429_and_the_headers(client):
    """A view throttled by QuotaThrottle documents 429 problem+json with Retry-After, and RateLimit headers."""
    responses = fetch_schema(client)["paths"]["/api/demo/ping"]["get"]["responses"]
    refused = responses["429"]
    assert refused["content"] == {"application/problem+json": {"schema": PROBLEM_REF}}
    assert {"RateLimit", "RateLimit-Policy", "Retry-After"} <= set(refused["headers"])
    assert refused["headers"]["Retry-After"]["schema"] == {"type": "integer"}
    assert {"RateLimit", "RateLimit-Policy"} <= set(responses["200"]["headers"])
    assert "Retry-After" not in responses["200"]["headers"]


def test_503_is_documented_where_the_quota_layer_answers_it(client, settings):
    """With adaptive limits installed (the project) or the closed failure mode, throttled views document 503."""
    responses = fetch_schema(client)["paths"]["/api/demo/ping"]["get"]["responses"]
    assert responses["503"]["content"] == {"application/problem+json": {"schema": PROBLEM_REF}}
    assert "Retry-After" in responses["503"]["headers"]


def test_the_usage_api_documents_its_own_limit(client):
    """The usage API has a throttle of its own (a QuotaThrottle): 429 and the RateLimit headers are documented."""
    responses = fetch_schema(client)["paths"]["/api/v1/usage/current"]["get"]["responses"]
    assert responses["429"]["content"] == {"application/problem+json": {"schema": PROBLEM_REF}}
    assert {"RateLimit", "RateLimit-Policy"} <= set(responses["200"]["headers"])


def test_views_not_throttled_by_quota_throttle_document_no_429():
    """A view without QuotaThrottle promises neither 429 nor RateLimit headers."""

    class Unthrottled(APIView):
        throttle_classes: list = []

    assert refusals_of(Unthrottled()) == {}


def test_the_api_key_header_is_an_api_key_security_scheme(client, settings):
    """APIKeyAuthentication is an apiKey scheme in QUOTAS['API_KEY_HEADER'], required by operations using it."""
    settings.QUOTAS = {**settings.QUOTAS, "API_KEY_HEADER": "X-Client-Key"}
    schema = fetch_schema(client)
    scheme = schema["components"]["securitySchemes"]["ApiKeyAuth"]
    assert (scheme["type"], scheme["in"], scheme["name"]) == ("apiKey", "header", "X-Client-Key")
    assert {"ApiKeyAuth": []} in schema["paths"]["/api/v1/usage/current"]["get"]["security"]


@pytest.mark.slow  # a real Python process
def test_quotas_and_usage_work_without_drf_spectacular(tmp_path):
    """drf-spectacular is optional: without it, the throttle, the handler and the usage API still import."""
    script = textwrap.dedent(
        """
        import sys
        sys.modules["drf_spectacular"] = None  # as if not installed: importing it raises ImportError
        import django
        from django.conf import settings
        settings.configure(
            INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "rest_framework",
                            "quotas", "plans", "usage"],
            DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
            SECRET_KEY="x",
        )
        django.setup()
        import quotas.drf.throttling, quotas.drf.handlers, quotas.django.decorators, usage.views
        print("ok")
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "ok", result.stderr
