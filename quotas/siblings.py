"""What the platform's own apps (plans, usage, adaptive, dashboard) use of the engine beyond :mod:`quotas.api`.

Not for projects, and not stable: these names follow the engine's internals
(the runtime, the Redis formats, each owned by one module of ``quotas``), so
the apps that ship with the engine can read what it writes. ``tests/test_layout.py``
keeps the sibling apps on :mod:`quotas.api`, this module and the contracts
that have a module of their own (settings, errors, signals, problem bodies,
the rules a backend builds, the DRF adapter, the metrics registry).

Still to do (issue "a core a DRF maintainer would take over"): calls
specific enough that the sibling apps never receive the runtime or a Redis
client (reading usage counters, the history, multipliers).
"""

from __future__ import annotations

from datetime import date, datetime

from quotas.conf import quota_settings
from quotas.contract.connect import STORE_ERRORS, connect
from quotas.contract.keys import client_keys, client_tag, encode_part, is_client_tag, multipliers_key
from quotas.contract.protocol import USAGE_COUNTERS, USAGE_TTL_DAYS, UsageCounter, parse_multipliers
from quotas.formats.periods import usage_day
from quotas.identity.addresses import address_group
from quotas.identity.clients import authenticate_key, hash_api_key, identify
from quotas.runtime import Runtime, get_runtime
from quotas.runtime.key_use import KEEP_SECONDS, forget_before, read_last_used
from quotas.standing import NEAR
from quotas.store.decision import scaled

__all__ = [
    "KEEP_SECONDS", "NEAR", "STORE_ERRORS", "USAGE_COUNTERS", "USAGE_TTL_DAYS", "Runtime", "UsageCounter",
    "address_group", "authenticate_key", "client_keys", "client_tag", "connect", "encode_part", "forget_before",
    "get_runtime", "hash_api_key", "identify", "is_client_tag", "multipliers_key", "parse_multipliers",
    "read_last_used", "scaled", "usage_date",
]  # fmt: skip


def usage_date(moment: datetime) -> date:
    """The usage day containing ``moment``: its usage rows' ``day``, where budget days begin
    (``QUOTAS['BUDGET_TIME_ZONE']``)."""
    return usage_day(moment.timestamp(), str(quota_settings.BUDGET_TIME_ZONE)).date
