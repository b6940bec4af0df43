"""The engine's internal API: what the platform's own apps (plans, usage, adaptive, dashboard, notifications,
console) use of the engine beyond :mod:`quotas.api`.

Not for projects, and not stable: these names follow the engine's internals
(the runtime, the Redis formats, each owned by one module of ``quotas``), so
the apps that ship with the engine can read what it writes. ``tests/test_layout.py``
keeps the sibling apps on :mod:`quotas.api`, this module and the contracts
that have a module of their own (settings, errors, signals, problem bodies,
the rules a backend builds, the DRF adapter, the metrics registry).

The calls below are specific: the rules snapshot, a plan's multiplier, a key's
subscriber, a page view's wait, and the reads of what the engine keeps in Redis
(usage counters, the history, keys' last use, the flush mark, the multipliers;
:class:`~quotas.store.back_office.BackOffice`). So the sibling apps never hold
the runtime, the store or a Redis client. The adaptive controller, a worker
coordinated through Redis, keeps its samples, memory and run lock on a board
of its own (:func:`controller_board`), whose calls are the store's too.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from django.db import transaction
from django.http import HttpRequest

from quotas.contract.keys import client_tag, encode_part, is_client_tag, multipliers_key
from quotas.contract.protocol import USAGE_TTL_DAYS
from quotas.engine import default_engine
from quotas.exceptions import StoreUnavailable
from quotas.formats.multipliers import parse_multipliers
from quotas.identity.addresses import address_group, client_ip
from quotas.identity.clients import authenticate_key, hash_api_key
from quotas.rules.limits import LimitRule
from quotas.rules.snapshot import RuleSet, Subscriber
from quotas.runtime.key_use import KEEP_SECONDS
from quotas.standing import NEAR
from quotas.store.back_office import BackOffice
from quotas.store.controller_board import ControllerBoard
from quotas.store.controller_board import host_key as controller_host_key
from quotas.store.controller_board import hosts_key as controller_hosts_key
from quotas.store.controller_board import lock_key as controller_lock_key
from quotas.store.controller_board import state_key as controller_state_key
from quotas.store.decision import scaled
from quotas.store.money.budget_day import usage_day_of
from quotas.store.usage_hash_format import (
    ANONYMOUS_CLIENT,
    MAX_TEXT,
    RETENTION_DAYS,
    Counters,
    RowKey,
    readable_days,
)

__all__ = [
    "ANONYMOUS_CLIENT",
    "KEEP_SECONDS",
    "MAX_TEXT",
    "NEAR",
    "RETENTION_DAYS",
    "STORE_ERRORS",
    "USAGE_TTL_DAYS",
    "ControllerBoard",
    "Counters",
    "RowKey",
    "address_group",
    "authenticate_key_now",
    "back_office",
    "client_ip",
    "client_tag",
    "controller_board",
    "controller_host_key",
    "controller_hosts_key",
    "controller_lock_key",
    "controller_state_key",
    "encode_part",
    "hash_api_key",
    "is_client_tag",
    "multipliers_key",
    "page_wait",
    "parse_multipliers",
    "plan_multiplier",
    "readable_days",
    "rules_changed",
    "rules_snapshot",
    "scaled",
    "subscriber_for_key",
    "usage_date",
]  # fmt: skip


#: What the back office's reads raise when Redis fails: the store's own error (every Redis call goes through it).
STORE_ERRORS: tuple[type[Exception], ...] = (StoreUnavailable,)


def usage_date(moment: datetime) -> date:
    """The usage day containing ``moment``: its usage rows' ``day``, where budget days begin
    (``QUOTAS['BUDGET_TIME_ZONE']``)."""
    return usage_day_of(moment.timestamp()).date


def now() -> float:
    """The engine's clock now (seconds since the epoch): what the platform's apps judge their own limits by, so
    that a test's clock (``quota_clock``) moves them with the engine."""
    return default_engine.runtime().clock.now()


def back_office() -> BackOffice:
    """The specific reads of what the engine keeps in Redis (usage, history, keys' last use, the flush mark,
    the multipliers), through this process's back-office client."""
    return default_engine.runtime().back_office


def controller_board() -> ControllerBoard:
    """The adaptive controller's board in ``QUOTAS['REDIS_URL']`` for this process: its samples, memory, run lock
    and the multipliers it publishes. Its reads wait four times ``SOCKET_TIMEOUT`` (a run is not a request)."""
    return default_engine.runtime().controller_board()


def rules_snapshot() -> RuleSet:
    """This process's rules snapshot (plans, limits, subscribers), reloaded first if it is stale."""
    return default_engine.runtime().rules.current()


def rules_changed() -> None:
    """A model the rules are built from changed: this process reads them again at once, and every process
    within a second of the transaction's commit (within a couple of seconds while Redis is unreadable: the
    database's change mark moves too)."""
    rules = default_engine.runtime().rules
    rules.mark_stale()
    transaction.on_commit(rules.committed)


def plan_multiplier(plan_id: int) -> float:
    """The adaptive multiplier published for ``plan_id`` now (1.0: none), read where the runtime reads it.
    Raises :class:`~quotas.exceptions.StoreUnavailable` when Redis fails."""
    return default_engine.runtime().back_office.multipliers().get(plan_id, 1.0)


def subscriber_for_key(key_hash: str) -> Subscriber | None:
    """The subscription a usable key's hash belongs to, from the rules snapshot (None: no such key)."""
    return default_engine.runtime().rules.subscriber_for_key(key_hash)


def authenticate_key_now(request: HttpRequest, raw_key: str) -> Any:
    """:func:`authenticate_key` on a fresh snapshot (a stale one is reloaded first: a reload empties the
    key cache the lookup fills). Raises :class:`~quotas.exceptions.InvalidAPIKey` for an unknown key."""
    rules = default_engine.runtime().rules
    rules.current()
    return authenticate_key(request, raw_key, rules)


def page_wait(tag: str, rule: LimitRule) -> int:
    """Seconds client ``tag`` must wait before its next request against ``rule`` (0: now, which is also the
    answer while Redis is down: a page of the platform's own is not worth refusing for an outage)."""
    try:
        decision = default_engine.runtime().guard.decide(tag, rule.windows)
    except StoreUnavailable:
        return 0
    return 0 if decision.allowed else max(1, decision.retry_after or 1)
