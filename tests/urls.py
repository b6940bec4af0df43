"""URLs for tests: the project's URLs plus views exercising edge cases."""

from decimal import Decimal

from django.urls import include, path
from rest_framework.response import Response
from rest_framework.throttling import AnonRateThrottle
from rest_framework.views import APIView

from quotas.throttling import QuotaThrottle


class FailingView(APIView):
    quota_scope = "failing"

    def get(self, request):
        raise RuntimeError("the view failed")


class WeightedView(APIView):
    quota_scope = "weighted"

    def get_quota_weight(self, request):
        return int(request.query_params.get("w", "1"))

    def get(self, request):
        return Response({"ok": True})


class ScopedView(APIView):
    throttle_scope = "scoped"

    def get(self, request):
        return Response({"ok": True})


class MixedThrottlesView(APIView):
    throttle_classes = [QuotaThrottle, AnonRateThrottle]

    def get(self, request):
        return Response({"ok": True})


class FiveEverySecond(QuotaThrottle):
    rate = "2/min"


class RateAttributeView(APIView):
    throttle_classes = [FiveEverySecond]

    def get(self, request):
        return Response({"ok": True})


class PricedView(APIView):
    """Estimates its cost from ?est= and reports the actual cost from ?actual=."""

    quota_scope = "priced"

    def get_quota_cost(self, request):
        est = request.query_params.get("est")
        return Decimal(est) if est is not None else None

    def get(self, request):
        actual = request.query_params.get("actual")
        if actual is not None:
            request.quota_cost = Decimal(actual)
        if request.query_params.get("fail"):
            raise RuntimeError("the priced view failed")
        return Response({"ok": True})


urlpatterns = [
    path("", include("config.urls")),
    path("t/failing", FailingView.as_view()),
    path("t/weighted", WeightedView.as_view()),
    path("t/scoped", ScopedView.as_view()),
    path("t/mixed", MixedThrottlesView.as_view()),
    path("t/rate-attr", RateAttributeView.as_view()),
    path("t/priced", PricedView.as_view()),
]
