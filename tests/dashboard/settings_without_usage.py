"""The project's settings without two apps the dashboard reads (tests/dashboard/test_checks.py)."""

from config.settings import *  # noqa: F403
from config.settings import INSTALLED_APPS as PROJECT_APPS
from config.settings import MIDDLEWARE as PROJECT_MIDDLEWARE

INSTALLED_APPS = [app for app in PROJECT_APPS if app not in ("usage", "adaptive")]
MIDDLEWARE = [m for m in PROJECT_MIDDLEWARE if not m.startswith("adaptive.")]
