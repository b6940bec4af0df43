"""URLs for tests: the project's URLs plus views exercising edge cases."""

from decimal import Decimal

from django.urls import include, path
from rest_framework.authentication import SessionAuthentication
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response
from rest_framework.throttling import AnonRateThrottle
from rest_framework.views import APIView

from quotas.drf.authentication import APIKeyAuthentication
from quotas.drf.handlers import problem_response
from quotas.throttling import QuotaThrottle
from tests.quotas.plain_urls import search as plain_search


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


#: What PricedView calls before it answers when asked (?during=1): a test's way to act between the decision and
#: the settlement (stopping Redis, say).
DURING_VIEW: list = []


class PricedView(APIView):
    """Estimates its cost from ?est= and reports the actual cost from ?actual=; ?fail=1 raises (a 500), ?invalid=1
    answers DRF's ValidationError (a 400, which rolls back under ATOMIC_REQUESTS)."""

    quota_scope = "priced"

    def get_quota_cost(self, request):
        est = request.query_params.get("est")
        return Decimal(est) if est is not None else None

    def get(self, request):
        actual = request.query_params.get("actual")
        if actual is not None:
            request.quota_cost = Decimal(actual)
        if request.query_params.get("during"):
            for step in DURING_VIEW:
                step()
        if request.query_params.get("fail"):
            raise RuntimeError("the priced view failed")
        if request.query_params.get("invalid"):
            raise ValidationError({"invalid": "asked to be invalid"})
        return Response({"ok": True})


class WhoAmIView(APIView):
    """Says who DRF's authentication found: request.user and request.auth."""

    def get(self, request):
        auth = request.auth
        return Response(
            {"user": str(request.user), "authenticated": request.user.is_authenticated,
             "subscription": getattr(auth, "id", None), "plan": getattr(auth, "plan_id", None)}
        )  # fmt: skip


class SessionFirstView(WhoAmIView):
    """API keys after sessions: DRF answers an authentication failure with 403 (no challenge to offer)."""

    authentication_classes = [SessionAuthentication, APIKeyAuthentication]


class MissingView(APIView):
    def get(self, request):
        raise NotFound("no such thing")


def composed_exception_handler(exc, context):
    """A project's own handler that lets quota refusals through as problem+json first."""
    response = problem_response(exc)
    if response is None:
        response = Response({"error": str(exc)}, status=getattr(exc, "status_code", 500))
        response["X-Handled-By"] = "project"
    return response


urlpatterns = [
    path("", include("config.urls")),
    path("t/failing", FailingView.as_view()),
    path("t/weighted", WeightedView.as_view()),
    path("t/scoped", ScopedView.as_view()),
    path("t/mixed", MixedThrottlesView.as_view()),
    path("t/rate-attr", RateAttributeView.as_view()),
    path("t/priced", PricedView.as_view()),
    path("t/whoami", WhoAmIView.as_view()),
    path("t/session-first", SessionFirstView.as_view()),
    path("t/missing", MissingView.as_view()),
    path("t/plain-search", plain_search),  # a plain Django view behind @quota_limited
]
