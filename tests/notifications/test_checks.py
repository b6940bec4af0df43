"""The notifications app's start-up checks and its Celery tasks."""

from __future__ import annotations

from django.core.checks import run_checks
from django.test import override_settings

from notifications.checks import check_beat_schedule


def ids(messages) -> list[str]:
    return [m.id for m in messages]


def test_the_projects_settings_pass_every_notifications_check():
    assert [m for m in run_checks() if m.id.startswith("notifications.")] == []


def test_a_beat_without_the_dispatcher_or_the_watcher_is_warned_about_each():
    with override_settings(CELERY_BEAT_SCHEDULE={}):
        messages = check_beat_schedule()
    assert ids(messages) == ["notifications.W002", "notifications.W002"]
    assert "never sent" in messages[0].msg
    assert "never notified" in messages[1].msg


def test_a_bad_setting_is_named(set_quotas):
    set_quotas(NOTIFICATIONS={"TIMEOUT": 0, "DISABLE_AFTER": "20", "RETRY_FOR": 60, "SIGN": True})
    messages = [m for m in run_checks() if m.id.startswith("notifications.")]
    text = "\n".join(m.msg for m in messages)
    assert "TIMEOUT" in text
    assert "DISABLE_AFTER" in text
    assert "SIGN" in text  # an unknown key, with a "did you mean"
    assert "RETRY_FOR" not in text


def test_the_celery_app_finds_both_tasks():
    """The project's Celery app (config/celery.py) registers what the beat schedule names."""
    from django.conf import settings

    from config.celery import app

    app.loader.import_default_modules()
    scheduled = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert {"notifications.dispatch", "notifications.watch"} <= scheduled
    assert {"notifications.dispatch", "notifications.watch"} <= set(app.tasks)
