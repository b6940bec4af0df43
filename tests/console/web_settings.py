"""Settings of the real gunicorn in test_web_tier.py: the project's, with webhooks to loopback over plain HTTP
allowed (the test's silent receiver) and a fast password hasher (each request signs in with basic auth, which
would otherwise spend its time hashing, not on what the test watches)."""

from config.settings import *  # noqa: F403
from config.settings import QUOTAS as PROJECT_QUOTAS

QUOTAS = {**PROJECT_QUOTAS, "NOTIFICATIONS": {"ALLOW_PRIVATE_ADDRESSES": True, "ALLOW_HTTP": True}}
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
