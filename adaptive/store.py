"""The adaptive app's board in Redis (see :mod:`quotas.store.controller_board` for its keys); every key starts
with ``QUOTAS['KEY_PREFIX']``."""

from __future__ import annotations

from quotas import internal_api
from quotas.internal_api import ControllerBoard
from quotas.settings import quota_settings


def host_key(host: str, pid: int) -> str:
    """The key of one process's latest load sample."""
    return internal_api.controller_host_key(quota_settings.KEY_PREFIX, host, pid)


def hosts_key() -> str:
    """The index of the sample keys."""
    return internal_api.controller_hosts_key(quota_settings.KEY_PREFIX)


def multipliers_key() -> str:
    """Where the controller publishes the multipliers (where the runtime reads them)."""
    return internal_api.multipliers_key(quota_settings.KEY_PREFIX)


def state_key() -> str:
    """The controller's memory between runs."""
    return internal_api.controller_state_key(quota_settings.KEY_PREFIX)


def lock_key() -> str:
    """The lock a controller run holds."""
    return internal_api.controller_lock_key(quota_settings.KEY_PREFIX)


def get_board() -> ControllerBoard:
    """This process's board of ``QUOTAS['REDIS_URL']`` (fork-safe, made again if the URL changes)."""
    return internal_api.controller_board()
