"""Budget alerts and bans: turn what a decision reports into signals and log lines."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import UTC, datetime

from quotas.conf import quota_settings
from quotas.rules.periods import period_bounds
from quotas.signals import budget_threshold_crossed, client_banned
from quotas.store.decision import Decision

logger = logging.getLogger(__name__)

THRESHOLDS = ((1, 80), (2, 100))


def fire_budget_alerts(tag: str, subscription_id: int | None, states: Iterable) -> None:
    """Send ``budget_threshold_crossed`` for every threshold a budget of client ``tag`` newly reached.

    The decision script reports each threshold once per budget and period
    (the level is stored with the budget's state), so this sends each signal
    exactly once, whichever process made the decision.
    """
    for state in states:
        if not state.alert:
            continue
        window = state.window
        bounds = period_bounds(window.period, datetime.now(UTC).timestamp(), quota_settings.BUDGET_TIME_ZONE,
                               window.anchor_day)  # fmt: skip
        for bit, percent in THRESHOLDS:
            if state.alert & bit:
                logger.info("quotas: %s reached %d%% of budget %r", tag, percent, window.policy)
                budget_threshold_crossed.send(
                    sender=Decision,
                    client_tag=tag.strip("{}"),
                    subscription_id=subscription_id,
                    budget=window.policy,
                    threshold=percent,
                    period_start=datetime.fromtimestamp(bounds.start, UTC),
                    spent_micros=state.used,
                    amount_micros=window.quota,
                )


def report_ban(tag: str, subscription_id: int | None, decision: Decision, plan: object) -> None:
    """Log a ban ``decision`` started for client ``tag`` and send ``client_banned`` (recorded for the admin)."""
    until = datetime.fromtimestamp(decision.now + decision.ban_wait_us / 1e6, UTC)
    logger.warning(
        "quotas: banned %s until %s after repeated refusals (plan %s)",
        tag,
        until.isoformat(timespec="seconds"),
        getattr(plan, "slug", None),
    )
    client_banned.send(
        sender=Decision,
        client_tag=tag.strip("{}"),
        subscription_id=subscription_id,
        plan_id=getattr(plan, "id", None),
        until=until,
    )
