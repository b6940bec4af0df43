"""The demo API. Every view is throttled by REST_FRAMEWORK's default QuotaThrottle."""

from __future__ import annotations

import hashlib
from decimal import Decimal

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from quotas.formats.money import api_amount, round_money
from quotas.http.cost import set_cost

MAX_QUERY = 200
MAX_PROMPT = 4000
MAX_OUTPUT = 1000
CHARS_PER_UNIT = 2000
PRICE_PER_1K_CHARS = Decimal("0.05")


class PongSerializer(serializers.Serializer):
    pong = serializers.BooleanField()


class ResultSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    title = serializers.CharField()


class SearchSerializer(serializers.Serializer):
    q = serializers.CharField()
    results = ResultSerializer(many=True)


class PingView(APIView):
    """Cheap: counts only against the plan-wide limit."""

    @extend_schema(responses=PongSerializer)
    def get(self, request: Request) -> Response:
        return Response({"pong": True})


class SearchView(APIView):
    """Expensive: also limited by the plan's "search" limit."""

    quota_scope = "search"

    @extend_schema(
        parameters=[OpenApiParameter("q", str, description="The words to look for (at most 200 characters).")],
        responses=SearchSerializer,
    )
    def get(self, request: Request) -> Response:
        q = request.query_params.get("q", "")
        if len(q) > MAX_QUERY:
            raise serializers.ValidationError({"q": f"At most {MAX_QUERY} characters."})
        words = [w for w in q.lower().split() if w]
        return Response(
            {
                "q": q,
                "results": [{"id": i, "title": f"Result {i} for {' '.join(words) or 'nothing'}"} for i in range(3)],
            }
        )


class TextField(serializers.CharField):
    """A CharField that takes text only: DRF's turns a JSON number into its digits, which would be weighed
    and priced differently from the same text."""

    def to_internal_value(self, data: object) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class GenerateSerializer(serializers.Serializer):
    prompt = TextField(max_length=MAX_PROMPT, allow_blank=False)
    max_output = serializers.IntegerField(min_value=1, max_value=MAX_OUTPUT, default=MAX_OUTPUT)


class GeneratedSerializer(serializers.Serializer):
    text = serializers.CharField()
    units = serializers.IntegerField(help_text="Rate units spent: 1, plus 1 per full 2,000 prompt characters.")
    cost = serializers.DecimalField(max_digits=12, decimal_places=6, help_text="The actual cost charged.")


class GenerateView(APIView):
    """A paid endpoint (like an AI model priced per size).

    It spends one rate unit, plus one per full 2,000 prompt characters, and money:
    the throttle charges an estimate (prompt plus the longest possible
    answer) before the view runs; the view then reports the actual cost
    (prompt plus the answer it produced), which replaces the estimate.
    """

    quota_scope = "generate"

    def _validated(self, request: Request) -> dict:
        """The request's validated input. The throttle weighs and prices the request before the view runs, so
        it validates first (a 400 before anything is charged): never weigh input the view would refuse."""
        validated = getattr(request, "_generate_input", None)
        if validated is None:
            serializer = GenerateSerializer(data=request.data)
            serializer.is_valid(raise_exception=True)
            validated = request._generate_input = serializer.validated_data  # type: ignore[attr-defined]
        return validated

    def get_quota_weight(self, request: Request) -> int:
        return 1 + len(self._validated(request)["prompt"]) // CHARS_PER_UNIT

    def get_quota_cost(self, request: Request) -> Decimal:
        return price(len(self._validated(request)["prompt"]) + MAX_OUTPUT)

    @extend_schema(request=GenerateSerializer, responses=GeneratedSerializer)
    def post(self, request: Request) -> Response:
        validated = self._validated(request)
        prompt = validated["prompt"]
        digest = hashlib.sha256(prompt.encode()).hexdigest()
        # A stand-in for a model: the answer's length depends on the prompt.
        answer = ("Generated answer " + digest)[: min(validated["max_output"], 20 + len(prompt) // 4)]
        cost = price(len(prompt) + len(answer))
        set_cost(request, cost)  # charged after the view, in place of get_quota_cost's estimate
        return Response({"text": answer, "units": self.get_quota_weight(request), "cost": api_amount(cost)})


def price(chars: int) -> Decimal:
    """What generating costs: PRICE_PER_1K_CHARS per thousand characters in and out."""
    return round_money(PRICE_PER_1K_CHARS * chars / 1000)
