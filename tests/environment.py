"""Loaded by pytest (``-p tests.environment``) before Django reads its settings.

The project refuses to start without a secret key (config/settings.py), and
a fresh clone has none: the test session makes up its own, which the
processes the tests start (gunicorn, Celery, ``config.run``) inherit.
"""

from __future__ import annotations

import os
import secrets

os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))
