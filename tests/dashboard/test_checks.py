"""The dashboard's system check (dashboard/checks.py): installed without an app it reads, it says which."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings as django_settings

from dashboard.checks import check_apps_it_reads

ROOT = Path(__file__).resolve().parents[2]


def test_the_project_passes():
    assert check_apps_it_reads() == []


@pytest.mark.parametrize("missing", [("usage",), ("adaptive",), ("usage", "adaptive")])
def test_a_missing_app_is_an_error_naming_it(settings, missing):
    """dashboard.E001 names exactly the apps missing, and its hint says to add them."""
    settings.INSTALLED_APPS = [app for app in django_settings.INSTALLED_APPS if app not in missing]

    (error,) = check_apps_it_reads()

    assert error.id == "dashboard.E001"
    assert error.msg.endswith(f"not in INSTALLED_APPS: {', '.join(missing)}.")  # only those
    assert error.hint.startswith(f"Add {', '.join(repr(app) for app in missing)} to INSTALLED_APPS")


@pytest.mark.slow  # a real Python process
def test_a_project_including_the_dashboard_urls_is_told_which_app_is_missing():
    """Django's URL checks import every URLconf before this app's check reports: `manage.py check` in a project
    whose URLs include the dashboard's stops on dashboard.E001's message, not on a model's RuntimeError."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.dashboard.settings_without_usage", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, timeout=60, check=False
    )

    last_line = done.stderr.decode().strip().splitlines()[-1]
    assert done.returncode != 0
    assert last_line.startswith("django.core.exceptions.ImproperlyConfigured: The dashboard reads the models")
    assert last_line.endswith("(dashboard.E001)")
    assert "usage, adaptive" in last_line
