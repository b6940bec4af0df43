"""Each app registers the section of QUOTAS it reads; the check of QUOTAS validates every installed app's section,
and a section set without its app is a warning naming the app."""

from __future__ import annotations

import pytest
from django.conf import settings as django_settings

from adaptive.conf import SECTION as ADAPTIVE
from console.conf import SECTION as CONSOLE
from notifications.conf import SECTION as NOTIFICATIONS
from plans.conf import SECTION as ACL_FEEDS
from quotas.checks import check_settings
from quotas.settings.registry import SECTION_APPS, AppSection, register, registered


def ids(messages) -> list[str]:
    return sorted(m.id for m in messages)


def test_each_app_registers_the_section_it_reads():
    """adaptive, notifications, plans and console registered theirs from ready(); SECTION_APPS names the same
    apps."""
    assert {s.name: s.app for s in registered()} == SECTION_APPS
    assert {s.name: s for s in registered()} == {
        "ADAPTIVE": ADAPTIVE, "NOTIFICATIONS": NOTIFICATIONS, "ACL_FEEDS": ACL_FEEDS, "CONSOLE": CONSOLE,
    }  # fmt: skip


def test_registering_again_changes_nothing_and_a_second_owner_is_refused():
    """ready() may run twice (tests that change INSTALLED_APPS); two apps claiming one name is a bug."""
    before = registered()
    register(ADAPTIVE)
    assert registered() == before
    with pytest.raises(ValueError, match="QUOTAS\\['ADAPTIVE'\\] is registered by 'adaptive' already"):
        register(AppSection("other_app", ADAPTIVE.setting, unknown_id="other_app.W001"))
    assert registered() == before


@pytest.mark.parametrize(
    ("section", "values", "expected"),
    [
        ("ADAPTIVE", {"INTERVAL": 0}, ["adaptive.E002"]),
        ("ADAPTIVE", ["INTERVAL"], ["adaptive.E001"]),
        ("NOTIFICATIONS", {"TIMEOUT": 0}, ["notifications.E002"]),
        ("NOTIFICATIONS", {"TIMEOUTS": 5}, ["notifications.W001"]),
        ("NOTIFICATIONS", "yes", ["notifications.E000"]),  # once: the app no longer checks its dict itself
        ("ACL_FEEDS", {"MAX_BYTES": 0}, ["quota_plans.E012"]),
        ("ACL_FEEDS", {"MAX_BYTE": 1}, ["quota_plans.W010"]),
    ],
)
def test_the_check_of_quotas_checks_each_apps_section_with_its_ids(settings, section, values, expected):
    settings.QUOTAS = {**settings.QUOTAS, section: values}
    messages = check_settings()
    assert ids(messages) == expected
    assert all(m.hint for m in messages)


@pytest.mark.parametrize(("section", "app"), [("ADAPTIVE", "adaptive"), ("NOTIFICATIONS", "notifications")])
def test_a_section_whose_app_is_not_installed_is_a_warning_naming_the_app(settings, section, app):
    """Not checked (nothing reads it, so a bad value harms nothing) but said: quotas.W008, not "unknown setting"."""
    settings.INSTALLED_APPS = [a for a in django_settings.INSTALLED_APPS if a not in (app, "dashboard")]
    settings.QUOTAS = {**settings.QUOTAS, section: {"INTERVAL": 0, "TIMEOUT": 0}}

    (warning,) = check_settings()

    assert warning.id == "quotas.W008"
    assert warning.msg == (
        f"QUOTAS[{section!r}] is set, but the {app!r} app that reads it is not in INSTALLED_APPS: it is ignored."
    )
    assert warning.hint == f"Add {app!r} to INSTALLED_APPS, or remove QUOTAS[{section!r}]."


def test_a_project_without_an_app_and_without_its_section_hears_nothing(settings):
    settings.INSTALLED_APPS = [a for a in django_settings.INSTALLED_APPS if a not in ("adaptive", "dashboard")]
    settings.QUOTAS = {k: v for k, v in settings.QUOTAS.items() if k != "ADAPTIVE"}
    assert check_settings() == []
