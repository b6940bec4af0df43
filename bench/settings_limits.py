"""The project's settings with ``limits``' sliding window counter instead of QuotaThrottle: the HTTP section's peer.

Everything else (middleware, metrics, authentication, the database, Redis) is
the same as ``config.settings``, so this server and the QuotaThrottle one
differ only by the throttle. ``BENCH_LIMITS_PLAN_RATES`` (JSON, plan id ->
rate in ``limits``' syntax) gives a plan's clients their rate; the others get
the peer's huge one (see :mod:`bench.limits_http`).
"""

import json
import os

from config.settings import *  # noqa: F403
from config.settings import REST_FRAMEWORK

REST_FRAMEWORK = {
    **REST_FRAMEWORK,
    "DEFAULT_THROTTLE_CLASSES": ["bench.limits_http.LimitsSlidingWindowHttpThrottle"],
}
BENCH_LIMITS_PLAN_RATES = {
    int(plan_id): rate for plan_id, rate in json.loads(os.environ.get("BENCH_LIMITS_PLAN_RATES", "{}")).items()
}
