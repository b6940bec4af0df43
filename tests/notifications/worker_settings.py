"""Settings of the real-worker test's Celery workers: the project's, with webhooks to loopback over plain HTTP
allowed (the test's receivers) and a TIMEOUT of 10 s (the slow receiver's delivery ends there)."""

from config.settings import *  # noqa: F403
from config.settings import QUOTAS as PROJECT_QUOTAS

QUOTAS = {**PROJECT_QUOTAS, "NOTIFICATIONS": {"ALLOW_PRIVATE_ADDRESSES": True, "ALLOW_HTTP": True, "TIMEOUT": 10.0}}
