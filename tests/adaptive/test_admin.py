"""Admin: the switch, pins with validated multipliers, read-only snapshots (adaptive/admin.py, models.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils import timezone

from adaptive.models import AdaptiveConfig, AdaptiveSnapshot, MultiplierOverride
from tests.factories import PlanFactory

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("value", [0, -0.5, 1.01, float("nan"), float("inf")])
def test_override_multiplier_must_be_in_zero_one(value: float) -> None:
    """0 < m <= 1 is validated by the model (admin, forms, full_clean)."""
    override = MultiplierOverride(plan=PlanFactory(), multiplier=value, reason="x")
    with pytest.raises(ValidationError, match="greater than 0 and at most 1"):
        override.full_clean()


def test_override_range_is_a_database_constraint_too() -> None:
    """Code that skips validation still cannot store a multiplier outside (0, 1]."""
    plan = PlanFactory()
    with pytest.raises(IntegrityError), transaction.atomic():
        MultiplierOverride.objects.create(plan=plan, multiplier=2.0, reason="x")


def test_active_overrides() -> None:
    """Active: no expiry, or an expiry in the future."""
    plan = PlanFactory()
    now = timezone.now()
    forever = MultiplierOverride.objects.create(plan=plan, multiplier=0.5, reason="a")
    later = MultiplierOverride.objects.create(plan=plan, multiplier=0.5, reason="b", expires_at=now + timedelta(1))
    MultiplierOverride.objects.create(plan=plan, multiplier=0.5, reason="c", expires_at=now - timedelta(1))
    assert set(MultiplierOverride.objects.active()) == {forever, later}
    assert forever.is_active
    assert later.is_active


def test_admin_pages(admin_client) -> None:
    """Every adaptive admin page renders; snapshots cannot be added; the switch only once."""
    plan = PlanFactory(slug="free")
    MultiplierOverride.objects.create(plan=plan, multiplier=0.5, reason="incident")
    AdaptiveSnapshot.objects.create(level=0.7, signals={"zone": "overloaded"}, multipliers={"1": 0.73}, reason="cut")
    for model in ("adaptiveconfig", "multiplieroverride", "adaptivesnapshot"):
        assert admin_client.get(reverse(f"admin:quota_adaptive_{model}_changelist")).status_code == 200
    assert admin_client.get(reverse("admin:quota_adaptive_adaptivesnapshot_add")).status_code == 403
    assert admin_client.get(reverse("admin:quota_adaptive_adaptiveconfig_add")).status_code == 200
    AdaptiveConfig.objects.create(enabled=False)
    assert admin_client.get(reverse("admin:quota_adaptive_adaptiveconfig_add")).status_code == 403


def test_admin_refuses_a_bad_pin(admin_client) -> None:
    """The add form shows the validation error and stores nothing."""
    plan = PlanFactory(slug="pro")
    url = reverse("admin:quota_adaptive_multiplieroverride_add")
    response = admin_client.post(url, {"plan": plan.pk, "multiplier": "1.5", "reason": "too much"})
    assert response.status_code == 200
    assert "greater than 0 and at most 1" in response.content.decode()
    assert not MultiplierOverride.objects.exists()
    response = admin_client.post(url, {"plan": plan.pk, "multiplier": "0.5", "reason": "incident 7"})
    assert response.status_code == 302
    assert MultiplierOverride.objects.get().multiplier == 0.5


def test_the_admin_says_when_a_pin_and_its_lifting_take_effect(admin_client) -> None:
    """Pins act through the controller's next publication: adding and deleting one say so, with the interval."""
    plan = PlanFactory()
    added = admin_client.post(
        reverse("admin:quota_adaptive_multiplieroverride_add"),
        {"plan": plan.pk, "multiplier": "0.5", "reason": "incident"},
        follow=True,
    )
    assert "takes effect at the adaptive controller&#x27;s next run, within 5 s" in added.content.decode()
    pin = MultiplierOverride.objects.get()
    deleted = admin_client.post(
        reverse("admin:quota_adaptive_multiplieroverride_delete", args=[pin.pk]), {"post": "yes"}, follow=True
    )
    assert "Lifting the pin takes effect at the adaptive controller" in deleted.content.decode()
    assert not MultiplierOverride.objects.exists()
