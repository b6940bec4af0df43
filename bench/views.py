"""The views, throttles and user the benchmark sends requests to.

Every view returns the same tiny Response; they differ only in their
throttles, so a variant's median minus the baseline's is the throttle's cost.
Import this module only after Django is configured.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.test import APIRequestFactory, force_authenticate
from rest_framework.throttling import BaseThrottle, UserRateThrottle
from rest_framework.views import APIView

from quotas.throttling import QuotaThrottle

from .peers import (
    HUGE_RATE,
    RACE_RATE,
    LimitsFiveWindowsThrottle,
    LimitsMovingWindowRaceThrottle,
    LimitsMovingWindowThrottle,
    LimitsSlidingWindowRaceThrottle,
    LimitsSlidingWindowThrottle,
    ratelimited,
)
from .rules import FIVE_LIMITS_SCOPE, FLOOD_SCOPE, ONE_LIMIT_SCOPE, TEN_LIMITS_SCOPE


@dataclass(frozen=True, slots=True)
class BenchUser:
    """The least a throttle reads from ``request.user`` (no auth app, no database)."""

    pk: int
    is_authenticated: bool = True
    is_active: bool = True


class HugeUserRateThrottle(UserRateThrottle):
    """DRF's per-user throttle with a rate no benchmark run can reach."""

    rate = "1000000/min"


class RaceUserRateThrottle(UserRateThrottle):
    """DRF's per-user throttle at the limit the concurrency race targets."""

    rate = "100/min"


class OneGetThrottle(BaseThrottle):
    """The floor of any Redis-backed throttle: one redis-py GET, nothing decided.

    Its cost minus the baseline is what one synchronous round trip costs from
    inside a DRF view (the blocking read, the thread waking up again), which is
    more than the bare GET timed in a loop.
    """

    client: Any = None  # set by the bench before use (bench.inprocess)

    def allow_request(self, request: Request, view: Any) -> bool:
        self.client.get("x")
        return True


class TinyView(APIView):
    """The baseline: no throttle at all."""

    throttle_classes: tuple[type, ...] = ()

    def get(self, request: Request) -> Response:
        return Response({"ok": True})


class OneGetView(TinyView):
    throttle_classes = (OneGetThrottle,)


class DrfThrottledView(TinyView):
    throttle_classes = (HugeUserRateThrottle,)


class OneLimitView(TinyView):
    throttle_classes = (QuotaThrottle,)
    quota_scope = ONE_LIMIT_SCOPE


class FiveLimitsView(TinyView):
    throttle_classes = (QuotaThrottle,)
    quota_scope = FIVE_LIMITS_SCOPE


class TenLimitsView(TinyView):
    throttle_classes = (QuotaThrottle,)
    quota_scope = TEN_LIMITS_SCOPE


@ratelimited(HUGE_RATE)
class RatelimitView(TinyView):
    """django-ratelimit instead of a DRF throttle (it decorates the handler)."""


class LimitsMovingWindowView(TinyView):
    throttle_classes = (LimitsMovingWindowThrottle,)


class LimitsSlidingWindowView(TinyView):
    throttle_classes = (LimitsSlidingWindowThrottle,)


class LimitsFiveWindowsView(TinyView):
    throttle_classes = (LimitsFiveWindowsThrottle,)


@ratelimited(RACE_RATE)
class RatelimitRaceView(TinyView):
    pass


class LimitsMovingWindowRaceView(TinyView):
    throttle_classes = (LimitsMovingWindowRaceThrottle,)


class LimitsSlidingWindowRaceView(TinyView):
    throttle_classes = (LimitsSlidingWindowRaceThrottle,)


class FloodView(TinyView):
    throttle_classes = (QuotaThrottle,)
    quota_scope = FLOOD_SCOPE


class DrfRaceView(TinyView):
    throttle_classes = (RaceUserRateThrottle,)


_factory = APIRequestFactory()


def make_anonymous_request(path: str, client: int) -> Any:
    """A fresh GET request with no user, from an address of its own for each ``client`` number."""
    address = f"10.{client >> 16 & 255}.{client >> 8 & 255}.{client & 255}"
    return _factory.get(path, REMOTE_ADDR=address)


def make_request(path: str, user: BenchUser) -> Any:
    """A fresh GET request authenticated as ``user`` (built outside any timing)."""
    request = _factory.get(path)
    force_authenticate(request, user=user)
    return request
