"""Loaded by pytest (``-p tests.environment``) before Django reads its settings.

The project refuses to start without a secret key (config/settings.py), and
a fresh clone has none: the test session makes up its own, which the
processes the tests start (gunicorn, Celery, ``config.run``) inherit. They also
inherit plain HTTP in place of the HTTPS a deployment gets with DEBUG off.
"""

from __future__ import annotations

import os
import secrets

os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))
# The tests speak plain HTTP (Django's test client, live servers, gunicorn on loopback), as `make run` does: no
# redirect to HTTPS, cookies over HTTP. The deployment defaults are tested in tests/test_deploy_settings.py.
for _name in ("SECURE_SSL_REDIRECT", "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE"):
    os.environ[_name] = "false"
