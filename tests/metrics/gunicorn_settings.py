"""The project's settings with the metrics tests' URLs (for the real gunicorn in test_multiprocess.py)."""

from config.settings import *  # noqa: F403

ROOT_URLCONF = "tests.metrics.urls"

# The test scrapes /metrics from loopback with no proxy in front: the one setup where that is safe.
QUOTAS = {**QUOTAS, "METRICS": {**QUOTAS["METRICS"], "ALLOW_LOOPBACK": True}}  # noqa: F405
