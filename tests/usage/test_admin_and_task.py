"""The read-only admin, and the Celery task and its schedule."""

from __future__ import annotations

import pytest

from config.celery import app
from tests.factories import UserFactory, issue_key
from usage import tasks
from usage.flush import flush_usage
from usage.models import UsageRecord

from .conftest import send

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]


def test_the_admin_lists_usage_read_only(client, api, free, redis_client):
    """Staff can list and filter usage records, but not add, change or delete them."""
    send(api, issue_key(plan=free), 2)
    flush_usage()
    client.force_login(UserFactory(username="root", is_staff=True, is_superuser=True))
    record = UsageRecord.objects.get()

    listing = client.get("/admin/quota_usage/usagerecord/", {"plan__id__exact": free.pk})
    assert listing.status_code == 200
    assert record.client.encode() in listing.content
    assert client.get("/admin/quota_usage/usagerecord/add/").status_code == 403
    assert client.post(f"/admin/quota_usage/usagerecord/{record.pk}/delete/", {"post": "yes"}).status_code == 403
    assert client.get(f"/admin/quota_usage/usagerecord/{record.pk}/change/").status_code == 200  # view only
    assert client.get("/admin/quota_usage/budgetalert/").status_code == 200


def test_the_task_is_scheduled_every_minute_and_flushes(api, free, settings, redis_server):
    """Beat runs usage.flush every 60 s; the task returns its report."""
    assert settings.CELERY_BEAT_SCHEDULE["usage-flush"]["task"] == "usage.flush"
    assert settings.CELERY_BEAT_SCHEDULE["usage-flush"]["schedule"] == 60.0
    assert "usage.flush" in app.tasks
    assert tasks.flush.acks_late
    send(api, issue_key(plan=free), 3)

    result = tasks.flush.run()

    assert (result["keys"], result["rows"], result["written"]) == (1, 1, 1)
    assert UsageRecord.objects.get().allowed == 3
