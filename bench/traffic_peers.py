"""The traffic section's plan, and each peer enforcing it the way its own users would.

One plan of three windows (:data:`RATES`: per second, per minute, per day),
enforced on one Redis by:

- QuotaThrottle: one limit of three rates (one decision, one script call);
- DRF: three ``UserRateThrottle`` subclasses in ``throttle_classes``, its
  documented burst-and-sustained pattern with a third window, on Django's
  ``RedisCache``;
- django-ratelimit: three stacked ``@ratelimit`` decorators, on Django's
  ``RedisCache``;
- ``limits``: one ``SlidingWindowCounterRateLimiter.hit()`` per window.

Each peer counts per client: the API key's subscription where the project's
``APIKeyAuthentication`` set one (over HTTP), else the user (in process).
DRF's and django-ratelimit's users would write that one-line key function too,
since a key holder has no user id. Import only after Django is configured.
"""

from __future__ import annotations

from typing import Any

from django.utils.decorators import method_decorator
from django_ratelimit.decorators import ratelimit
from limits import RateLimitItem, parse
from limits.strategies import SlidingWindowCounterRateLimiter
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle, UserRateThrottle

from quotas.rules.snapshot import Subscriber

from .peers import limits_storage
from .rules import TRAFFIC_RATES as RATES


def client_of(request: Any) -> str:
    """The client a peer counts against: the API key's subscription, else the user."""
    auth = getattr(request, "auth", None)
    if isinstance(auth, Subscriber):
        return f"s{auth.id}"
    return f"u{request.user.pk}"


class _DrfWindow(UserRateThrottle):
    """One window of DRF's stacked per-user throttles, counted per :func:`client_of`."""

    def get_cache_key(self, request: Request, view: Any) -> str:
        return self.cache_format % {"scope": self.scope, "ident": client_of(request)}


class DrfPerSecond(_DrfWindow):
    scope = "traffic_second"
    rate = RATES["second"]


class DrfPerMinute(_DrfWindow):
    scope = "traffic_minute"
    rate = RATES["minute"]


class DrfPerDay(_DrfWindow):
    scope = "traffic_day"
    rate = RATES["day"]


DRF_THROTTLES: tuple[type[BaseThrottle], ...] = (DrfPerSecond, DrfPerMinute, DrfPerDay)


def ratelimit_key(group: str, request: Any) -> str:
    """django-ratelimit's ``key`` callable: :func:`client_of`."""
    return client_of(request)


def stacked_ratelimits(view_class: type) -> type:
    """``view_class`` with one ``@ratelimit`` per window stacked on its ``get`` (a refusal raises 403)."""
    for window, rate in RATES.items():
        decorator = ratelimit(group=f"traffic-{window}", key=ratelimit_key, rate=rate, block=True)
        view_class = method_decorator(decorator, name="get")(view_class)
    return view_class


_items: tuple[RateLimitItem, ...] = tuple(parse(rate) for rate in RATES.values())


class LimitsThreeWindows(BaseThrottle):
    """``limits``' sliding window counter, one ``hit()`` per window, as its users enforce several windows."""

    def allow_request(self, request: Request, view: Any) -> bool:
        limiter = _limiter()
        client = client_of(request)
        return all(limiter.hit(item, "traffic", client) for item in _items)


def _limiter() -> SlidingWindowCounterRateLimiter:
    return SlidingWindowCounterRateLimiter(limits_storage())
