"""The console's system check (console/checks.py): installed without an app it manages, it says which."""

from __future__ import annotations

import pytest
from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured

from console.checks import check_apps_it_reads, require_apps_it_reads


def test_the_project_passes():
    assert check_apps_it_reads() == []


@pytest.mark.parametrize("missing", [("notifications",), ("plans", "notifications")])
def test_a_missing_app_is_an_error_naming_it(settings, missing):
    settings.INSTALLED_APPS = [app for app in django_settings.INSTALLED_APPS if app not in missing]
    (error,) = check_apps_it_reads()
    assert error.id == "quota_console.E010"
    assert error.msg.endswith(f"not in INSTALLED_APPS: {', '.join(missing)}.")
    assert error.hint.startswith(f"Add {', '.join(repr(app) for app in missing)} to INSTALLED_APPS")
    with pytest.raises(ImproperlyConfigured, match=r"\(quota_console\.E010\)$"):
        require_apps_it_reads()
