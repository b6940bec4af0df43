"""The other limiters the benchmark compares QuotaThrottle with, on the same Redis and the same DRF view.

- django-ratelimit: ``@ratelimit(key="user")`` on the view's ``get``, counting
  in Django's ``RedisCache`` (``cache.add`` then ``cache.incr``: a fixed window
  per key, its edge shifted by a hash of the key);
- limits: ``MovingWindowRateLimiter`` (a sorted set per key, one Lua script)
  and ``SlidingWindowCounterRateLimiter`` (two counters, one Lua script) on
  ``limits.storage.RedisStorage``, wrapped in a DRF throttle; and the sliding
  window counter with one ``hit()`` per window of the five-limit plan, as
  its users enforce several limits.

Import this module only after Django is configured.
"""

from __future__ import annotations

import os
import zlib
from typing import Any

from django.conf import settings
from django.utils.decorators import method_decorator
from django_ratelimit.decorators import ratelimit
from limits import RateLimitItem, parse
from limits.storage import RedisStorage
from limits.strategies import MovingWindowRateLimiter, RateLimiter, SlidingWindowCounterRateLimiter
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from .rules import FIVE_LIMITS

HUGE_RATE = "1000000/m"  # django-ratelimit's syntax; what no run can reach
RACE_RATE = "100/m"

_storage: tuple[int, RedisStorage] | None = None


def limits_storage() -> RedisStorage:
    """This process's limits storage on the bench Redis (a forked child makes its own)."""
    global _storage
    if _storage is None or _storage[0] != os.getpid():
        _storage = (os.getpid(), RedisStorage(settings.QUOTAS["REDIS_URL"]))
    return _storage[1]


class LimitsThrottle(BaseThrottle):
    """A DRF throttle deciding with one ``limits`` strategy, per user."""

    strategy: type[RateLimiter] = MovingWindowRateLimiter
    rate = "1000000/minute"  # limits' syntax

    def __init__(self) -> None:
        self.item = parse(self.rate)

    def allow_request(self, request: Request, view: Any) -> bool:
        return self.strategy(limits_storage()).hit(self.item, "bench", str(request.user.pk))


class LimitsMovingWindowThrottle(LimitsThrottle):
    strategy = MovingWindowRateLimiter


class LimitsSlidingWindowThrottle(LimitsThrottle):
    strategy = SlidingWindowCounterRateLimiter


class LimitsMovingWindowRaceThrottle(LimitsThrottle):
    strategy = MovingWindowRateLimiter
    rate = "100/minute"


class LimitsSlidingWindowRaceThrottle(LimitsThrottle):
    strategy = SlidingWindowCounterRateLimiter
    rate = "100/minute"


#: The windows of QuotaThrottle's five limits (:data:`bench.rules.FIVE_LIMITS`) in limits' syntax, each under
#: its limit's name, so two windows of one size stay two counters.
FIVE_WINDOWS: tuple[tuple[str, RateLimitItem], ...] = tuple(
    (rule.id, parse(f"{rate.limit}/{rate.window} seconds")) for rule in FIVE_LIMITS for rate in rule.rates
)


class LimitsFiveWindowsThrottle(BaseThrottle):
    """limits' sliding window counter, one ``hit()`` per window of the five-limit plan (one round trip each)."""

    def allow_request(self, request: Request, view: Any) -> bool:
        limiter = SlidingWindowCounterRateLimiter(limits_storage())
        user = str(request.user.pk)
        return all(limiter.hit(item, "bench", name, user) for name, item in FIVE_WINDOWS)


def ratelimited(rate: str) -> Any:
    """django-ratelimit's decorator for a class-based view's ``get`` (a denial raises 403)."""
    return method_decorator(ratelimit(group="bench", key="user", rate=rate, block=True), name="get")


def ratelimit_window_offset(user_pk: int, period: int = 60) -> int:
    """Seconds past each aligned ``period`` at which django-ratelimit's window for ``user_pk`` turns."""
    return zlib.crc32(str(user_pk).encode()) % period
