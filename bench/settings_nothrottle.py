"""The project's settings with no throttle at all: the HTTP section's baseline gunicorn.

Everything else (middleware, authentication, the database, Redis) is the same
as ``config.settings``, so the two servers differ only by QuotaThrottle.
"""

from config.settings import *  # noqa: F403
from config.settings import REST_FRAMEWORK

REST_FRAMEWORK = {**REST_FRAMEWORK, "DEFAULT_THROTTLE_CLASSES": []}
