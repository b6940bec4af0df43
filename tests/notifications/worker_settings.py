"""Settings of the real-worker test's Celery workers: the project's, with webhooks to loopback over plain HTTP
allowed (the test's receivers) and a TIMEOUT of 5 s (the slow receiver's delivery ends there: long enough for a
usage flush to run meanwhile on the other worker, on a busy machine too; it was 10 s, 5 s more of the test's time)."""

from config.settings import *  # noqa: F403
from config.settings import QUOTAS as PROJECT_QUOTAS

QUOTAS = {**PROJECT_QUOTAS, "NOTIFICATIONS": {"ALLOW_PRIVATE_ADDRESSES": True, "ALLOW_HTTP": True, "TIMEOUT": 5.0}}
