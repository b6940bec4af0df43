"""Budget alerts, a subscription's own thresholds and bans: turn what a decision reports into signals and log
lines.

Their receivers record rows (``BudgetAlert``, a notification ``Event`` and its
deliveries, a ban record) that must outlive the request: Redis has stored the
alert level or the ban, so a row the request's transaction took with it would
never be written again. Inside an atomic block (``ATOMIC_REQUESTS``, DRF
rolling back a 4xx, a project's own ``transaction.atomic()``), the signal is
therefore sent from a thread of its own, whose database connections commit
on their own (autocommit) and are closed when it ends.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from django.db import connections, transaction
from django.dispatch import Signal

from quotas.formats.periods import period_bounds
from quotas.rules.limits import Window
from quotas.settings import quota_settings
from quotas.signals import budget_threshold_crossed, client_banned, spend_threshold_reached
from quotas.store.decision import Decision, Span

logger = logging.getLogger(__name__)

THRESHOLDS = ((1, 80), (2, 100))
#: Seconds a request waits for the thread that records its signals apart from its transaction (see _send).
_APART_WAIT = 2.0


#: What a period limit counts, by its algorithm (a budget counts money).
_UNITS = {"period_requests": "requests", "period_quota": "units"}


def fire_budget_alerts(
    tag: str, subscription_id: int | None, states: Iterable, at: float, spans: Iterable[Span] = ()
) -> None:
    """Send ``budget_threshold_crossed`` for every threshold a budget of client ``tag`` newly reached, and
    ``spend_threshold_reached`` for every threshold of its subscription's own that the committed spend of
    ``spans`` crossed, all in the order of their percents (a customer's 50 % before the platform's 100 %).

    The decision script reports each threshold once per budget and period
    (the level is stored with the budget's state), so this sends each signal
    exactly once, whichever process made the decision. ``at`` is the
    decision's time on Redis's clock, which chose the period: a reconciliation
    that lands after midnight files its alert under the period it belongs to.
    A receiver that raises is logged; it never turns the request into an error.
    """
    crossings: list[tuple[int, Signal, dict[str, Any]]] = []
    for state in states:
        if not state.alert:
            continue
        window = state.window
        bounds = period_bounds(window.period, at, quota_settings.BUDGET_TIME_ZONE, window.anchor_day)
        for bit, percent in THRESHOLDS:
            if state.alert & bit:
                logger.info("quotas: %s reached %d%% of budget %r", tag, percent, window.policy)
                crossings.append((percent, budget_threshold_crossed, {
                    "client_tag": tag.strip("{}"),
                    "subscription_id": subscription_id,
                    "budget": window.policy,
                    "threshold": percent,
                    "period_start": datetime.fromtimestamp(bounds.start, UTC),
                    "spent_micros": state.used,
                    "amount_micros": window.quota,
                    "limit": window.limit_id,
                    "unit": _UNITS.get(window.algorithm, "money"),
                    "currency": window.currency,
                }))  # fmt: skip
    if subscription_id is not None:
        crossings += own_crossings(tag, subscription_id, spans)
    if crossings:
        crossings.sort(key=lambda crossing: crossing[0])  # stable: the platform's first at the same percent
        _send(*((signal, kwargs) for _, signal, kwargs in crossings))


def own_crossings(tag: str, subscription_id: int, spans: Iterable[Span]) -> list[tuple[int, Signal, dict[str, Any]]]:
    """The subscription's own thresholds (each span's ``window.alerts``) that its committed spend crossed: from
    below to at or above the percent, of the limit's amount, and for a customer's cap of the budget it lowers
    too. (percent, signal, keyword arguments) each."""
    found: list[tuple[int, Signal, dict[str, Any]]] = []
    for window, before, after, end in spans:
        if after <= before:
            continue
        targets = [(window.policy, window.quota)]
        if window.lowered is not None:
            targets.append((window.lowered[0], window.lowered[1]))
        for name, amount in targets:
            for percent in window.alerts:
                if amount > 0 and before * 100 < amount * percent <= after * 100:
                    found.append((percent, spend_threshold_reached, {
                        "client_tag": tag.strip("{}"),
                        "subscription_id": subscription_id,
                        "budget": name,
                        "limit": window.limit_id,
                        "period": window.period,
                        "threshold": percent,
                        "period_start": datetime.fromtimestamp(_start(window, end), UTC),
                        "period_end": datetime.fromtimestamp(end, UTC),
                        "spent_micros": after,
                        "amount_micros": amount,
                        "currency": window.currency,
                    }))  # fmt: skip
    return found


def _start(window: Window, end: float) -> float:
    """The start of ``window``'s period that ends at ``end`` (a billing month's by its anchor day)."""
    return float(period_bounds(window.period, end - 1, quota_settings.BUDGET_TIME_ZONE, window.anchor_day).start)


def report_ban(tag: str, subscription_id: int | None, decision: Decision, plan: object) -> None:
    """Log a ban ``decision`` started for client ``tag`` and send ``client_banned`` (recorded for the admin)."""
    until = datetime.fromtimestamp(decision.now + decision.ban_wait_us / 1e6, UTC)
    logger.warning(
        "quotas: banned %s until %s after repeated refusals (plan %s)",
        tag,
        until.isoformat(timespec="seconds"),
        getattr(plan, "slug", None),
    )
    _send(
        (
            client_banned,
            {
                "client_tag": tag.strip("{}"),
                "subscription_id": subscription_id,
                "plan_id": getattr(plan, "id", None),
                "until": until,
            },
        )
    )


def _send(*sends: tuple[Signal, dict[str, Any]]) -> None:
    """Send each of ``sends`` (a signal and its keyword arguments), in order, to every receiver, apart from any
    transaction open here (see the module docstring)."""
    if not _in_transaction():
        _send_now(sends)
        return
    # A thread (one for all of a call's alerts) costs a few hundred microseconds and a database connection:
    # alerts are rare (at most two per budget, client and period) and bans rarer, so it is never on a hot path.
    # Joined: the request goes on once the rows are committed, as it does when they are written inline. But
    # not for ever: a row the request's transaction has locked (a view that took its subscription FOR UPDATE)
    # holds the thread until that transaction ends, so past _APART_WAIT the request goes on and the thread
    # commits after it.
    thread = threading.Thread(target=_send_apart, args=(sends,), name="quotas-signal")
    thread.start()
    thread.join(_APART_WAIT)


def _in_transaction() -> bool:
    """Whether a database connection of this thread is inside an atomic block that may roll back.

    A test case's own wrapping transaction (Django's TestCase, pytest-django's ``db``) is not the request's:
    Django marks it, and treats it so for ``durable`` blocks too. Rows written inside it stay visible to the
    test; a thread's connection could not see the test's rows (its subscriptions) nor write past its locks.
    SQLite is left out: it has one writer at a time, so a second connection would wait for the request's
    transaction (up to its busy timeout) and then fail; there the rows follow the request's transaction.
    """
    for connection in connections.all(initialized_only=True):
        if connection.vendor == "sqlite" or not connection.in_atomic_block:
            continue
        # Asked through Django's own rule: a durable block may not open inside another atomic block, except
        # inside a test case's (it refuses before touching the database; a test case's gets a savepoint).
        try:
            with transaction.atomic(using=connection.alias, durable=True):
                pass
        except RuntimeError:
            return True
    return False


def _send_apart(sends: tuple[tuple[Signal, dict[str, Any]], ...]) -> None:
    """:func:`_send_now` in a thread of its own: its connections (autocommit) commit each row, then close."""
    try:
        _send_now(sends)
    finally:
        connections.close_all()  # this thread's connections only (back to the pool, where there is one)


def _send_now(sends: tuple[tuple[Signal, dict[str, Any]], ...]) -> None:
    """Send each of ``sends`` to every receiver; one that raises is logged, and neither stops the others nor fails
    the request (it has been charged, and the view is about to run or has run)."""
    for signal, kwargs in sends:
        for receiver, result in signal.send_robust(sender=Decision, **kwargs):
            if isinstance(result, Exception):
                logger.error(
                    "quotas: a receiver of %s failed: %r",
                    _name(signal),
                    receiver,
                    exc_info=(type(result), result, None),
                )


def _name(signal: Signal) -> str:
    if signal is client_banned:
        return "client_banned"
    return "spend_threshold_reached" if signal is spend_threshold_reached else "budget_threshold_crossed"
