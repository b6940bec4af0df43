"""A project's own test suite on the memory store: ``REDIS_URL = "memory://"``, real 429s, no redis-server.

The test writes a small project (settings as Getting started gives them, naming a Redis that is not there, and a
DRF view) and what the Testing page adds (test settings on ``memory://``, ``pytest.ini`` naming them, the
conftest and the example tests, read from docs/testing.md, so the page stays what runs), then runs pytest on it
in a subprocess whose ``PATH`` has no ``redis-server`` and whose test settings name no Redis. ``FAILURE_MODE`` is
``"closed"``: had the engine failed to decide, every request would be a 503, never a 200 or a 429. Its
second test moves the store's clock instead of sleeping.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.doc_blocks import doc_block

ROOT = Path(__file__).resolve().parent.parent

#: A project's own pytest, run in a process of its own.
pytestmark = pytest.mark.slow

SETTINGS = """
SECRET_KEY = "adopter-tests"
USE_TZ = True
ROOT_URLCONF = "adopter_urls"
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth", "rest_framework", "quotas", "plans"]
MIDDLEWARE = ["quotas.middleware.SignInThrottleMiddleware", "quotas.middleware.QuotaHeadersMiddleware"]
REST_FRAMEWORK = {
    "DEFAULT_THROTTLE_CLASSES": ["quotas.throttling.QuotaThrottle"],
    "DEFAULT_THROTTLE_RATES": {"anon": "60/min", "user": "600/min"},
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "quotas.drf.authentication.APIKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "EXCEPTION_HANDLER": "quotas.drf.handlers.exception_handler",
}
QUOTAS = {
    "REDIS_URL": "redis://127.0.0.1:1/0",  # nothing listens: only the Testing page's test settings make it work
    "RULES_BACKEND": "plans.rules.PlansRulesBackend",
    "FAILURE_MODE": "closed",
}
"""

URLS = """
from django.urls import path
from rest_framework.decorators import api_view
from rest_framework.response import Response


@api_view(["GET"])
def ping(request):
    return Response({"pong": True})


urlpatterns = [path("ping", ping)]
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The project's own settings (mysite/settings.py), and, from the Testing page, its test settings, pytest.ini,
    conftest.py and tests."""
    (tmp_path / "mysite").mkdir()
    (tmp_path / "mysite" / "__init__.py").write_text("")
    (tmp_path / "mysite" / "settings.py").write_text(textwrap.dedent(SETTINGS))
    (tmp_path / "mysite" / "test_settings.py").write_text(doc_block("testing.md", "testing-settings"))
    (tmp_path / "adopter_urls.py").write_text(textwrap.dedent(URLS))
    (tmp_path / "conftest.py").write_text(doc_block("testing.md", "testing-conftest"))
    (tmp_path / "test_adopter.py").write_text(doc_block("testing.md", "testing-example"))
    (tmp_path / "pytest.ini").write_text(doc_block("testing.md", "testing-ini", language="ini"))
    return tmp_path


def test_a_projects_tests_get_real_429s_with_no_redis(project: Path):
    """The Testing page's two tests pass as written: a 429 after three requests with a key issued in code, and
    a minute moved on the store's clock."""
    python_dir = str(Path(sys.executable).parent)
    path = os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep) if d and d != python_dir)
    path = os.pathsep.join(d for d in path.split(os.pathsep) if not (Path(d) / "redis-server").exists())
    env = {**os.environ, "PATH": path, "PYTHONPATH": str(ROOT)}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    env.pop("DATABASE_URL", None)
    assert shutil.which("redis-server", path=path) is None
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_adopter.py"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "2 passed" in result.stdout
