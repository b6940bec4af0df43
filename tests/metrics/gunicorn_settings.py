"""The project's settings with the metrics tests' URLs (for the real gunicorn in test_multiprocess.py)."""

from config.settings import *  # noqa: F403

ROOT_URLCONF = "tests.metrics.urls"
