"""Django settings for the benchmark, configured in code (no database).

Only what the measured paths need: DRF, the quotas app (whose ``ready()``
resets the engine when QUOTAS changes) and two consumers of the bench Redis:
the quota engine and Django's built-in Redis cache used by DRF's throttles.
"""

from __future__ import annotations

import django
from django.conf import settings


def configure(redis_url: str) -> None:
    """Configure Django once for this process, pointed at ``redis_url``."""
    settings.configure(
        DEBUG=False,
        SECRET_KEY="bench-only",
        ALLOWED_HOSTS=["testserver"],
        USE_TZ=True,
        INSTALLED_APPS=["rest_framework", "quotas"],
        DATABASES={},
        CACHES={
            "default": {
                "BACKEND": "django.core.cache.backends.redis.RedisCache",
                "LOCATION": redis_url,
            }
        },
        REST_FRAMEWORK={
            # Requests are authenticated with force_authenticate(); nothing else runs.
            "DEFAULT_AUTHENTICATION_CLASSES": [],
            "DEFAULT_PERMISSION_CLASSES": [],
            "DEFAULT_THROTTLE_CLASSES": [],
            "UNAUTHENTICATED_USER": None,
        },
        QUOTAS={
            "REDIS_URL": redis_url,
            "RULES_BACKEND": "bench.rules.BenchBackend",
            # Fail closed so a Redis error shows up as a 503 the bench checks for,
            # instead of silently admitted (and suspiciously fast) requests.
            "FAILURE_MODE": "closed",
            # A loaded 2-core machine can stall a reply past the 0.25 s default.
            "SOCKET_TIMEOUT": 2.0,
        },
    )
    django.setup()
