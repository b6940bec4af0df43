"""The demo API. Every view is throttled by REST_FRAMEWORK's default QuotaThrottle."""

from __future__ import annotations

import hashlib

from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

MAX_PROMPT = 4000
UNITS_PER_CHARS = 500


class PingView(APIView):
    """Cheap: counts only against the plan-wide limit."""

    def get(self, request: Request) -> Response:
        return Response({"pong": True})


class SearchView(APIView):
    """Expensive: also limited by the plan's "search" limit."""

    quota_scope = "search"

    def get(self, request: Request) -> Response:
        q = request.query_params.get("q", "")
        if len(q) > 200:
            raise serializers.ValidationError({"q": "At most 200 characters."})
        words = [w for w in q.lower().split() if w]
        return Response(
            {
                "q": q,
                "results": [{"id": i, "title": f"Result {i} for {' '.join(words) or 'nothing'}"} for i in range(3)],
            }
        )


class GenerateSerializer(serializers.Serializer):
    prompt = serializers.CharField(max_length=MAX_PROMPT, allow_blank=False)


class GenerateView(APIView):
    """Costly per size: a request spends one unit per started 500 prompt characters."""

    quota_scope = "generate"

    def get_quota_weight(self, request: Request) -> int:
        prompt = request.data.get("prompt", "") if hasattr(request.data, "get") else ""
        if not isinstance(prompt, str):
            return 1
        return 1 + min(len(prompt), MAX_PROMPT) // UNITS_PER_CHARS

    def post(self, request: Request) -> Response:
        serializer = GenerateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        prompt = serializer.validated_data["prompt"]
        digest = hashlib.sha256(prompt.encode()).hexdigest()[:16]
        return Response(
            {"text": f"Generated {len(prompt.split())}-word answer #{digest}", "units": self.get_quota_weight(request)}
        )
