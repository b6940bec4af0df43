"""The project's settings with one traffic peer instead of QuotaThrottle: section 12's peer gunicorns.

``BENCH_TRAFFIC_PEER`` picks the peer (:mod:`bench.traffic_peers`): ``drf``
(three stacked ``UserRateThrottle`` windows), ``django_ratelimit`` (three
stacked decorators on the ping view, :mod:`bench.traffic_urls`) or ``limits``
(one ``hit()`` per window). DRF and django-ratelimit count in Django's cache,
here ``RedisCache`` on the bench Redis, as their users must for one count
across processes. Everything else is ``config.settings``.
"""

import os

from config.settings import *  # noqa: F403
from config.settings import REST_FRAMEWORK

PEER = os.environ["BENCH_TRAFFIC_PEER"]
CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": os.environ["REDIS_URL"]}}
THROTTLE_CLASSES = {
    "drf": [
        "bench.traffic_peers.DrfPerSecond",
        "bench.traffic_peers.DrfPerMinute",
        "bench.traffic_peers.DrfPerDay",
    ],
    "django_ratelimit": [],
    "limits": ["bench.traffic_peers.LimitsThreeWindows"],
}
REST_FRAMEWORK = {**REST_FRAMEWORK, "DEFAULT_THROTTLE_CLASSES": THROTTLE_CLASSES[PEER]}
if PEER == "django_ratelimit":
    ROOT_URLCONF = "bench.traffic_urls"
