"""Fixtures the engine's tests share."""

from __future__ import annotations

import pytest

from quotas.signals import budget_threshold_crossed


@pytest.fixture
def alerts():
    """The budget alerts sent, as (threshold, spent in micro-units)."""
    sent: list[tuple[int, int]] = []

    def receiver(sender, threshold, spent_micros, **kwargs):
        sent.append((threshold, spent_micros))

    budget_threshold_crossed.connect(receiver, weak=False)
    yield sent
    budget_threshold_crossed.disconnect(receiver)
