"""The best peer over HTTP: ``limits``' sliding window counter as the demo API's DRF throttle.

Section 6's ``limits_swc`` gunicorn (``bench.settings_limits``) throttles with
:class:`LimitsSlidingWindowHttpThrottle` instead of QuotaThrottle; the
strategy, the storage and the default rate are those of the in-process peer
(:class:`bench.peers.LimitsSlidingWindowThrottle`). Like QuotaThrottle it keeps
one counter per client: the API key's subscription (``request.auth``, set by
the project's APIKeyAuthentication), else the address. Like a plan, the rate
follows the client's plan: ``settings.BENCH_LIMITS_PLAN_RATES`` maps a plan id
to a rate in ``limits``' syntax (the denied stream's ``1/day``); every other
client gets the peer's huge rate.

A refusal is DRF's plain 429 (``Throttled``): no Retry-After, since ``wait``
would cost ``limits`` a second Redis call (``get_window_stats``).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from django.conf import settings
from limits import RateLimitItem, parse
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from quotas.rules.snapshot import Subscriber

from .peers import LimitsSlidingWindowThrottle, limits_storage

NAMESPACE = "bench-http"


@lru_cache(maxsize=32)
def rate_item(rate: str) -> RateLimitItem:
    """``rate`` parsed once per process (the in-process peer parses per request; here the rate varies)."""
    return parse(rate)


class LimitsSlidingWindowHttpThrottle(BaseThrottle):
    """One ``SlidingWindowCounterRateLimiter.hit`` per request, on the client's counter at its plan's rate."""

    strategy = LimitsSlidingWindowThrottle.strategy
    rate = LimitsSlidingWindowThrottle.rate

    def allow_request(self, request: Request, view: Any) -> bool:
        subscriber = request.auth
        if isinstance(subscriber, Subscriber):
            client = f"s:{subscriber.id}"
            rate = getattr(settings, "BENCH_LIMITS_PLAN_RATES", {}).get(subscriber.plan_id, self.rate)
        else:
            client, rate = f"ip:{self.get_ident(request)}", self.rate
        return self.strategy(limits_storage()).hit(rate_item(rate), NAMESPACE, client)
