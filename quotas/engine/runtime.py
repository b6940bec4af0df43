"""This process's engine: built from ``settings.QUOTAS`` on first use, rebuilt after a settings change."""

from __future__ import annotations

import threading

from django.utils.module_loading import import_string

from quotas.conf import quota_settings
from quotas.engine import shaping
from quotas.engine.core import Engine
from quotas.engine.keys import rules_version_key
from quotas.engine.redis_connect import connect
from quotas.identity.auth_failures import failed_auth
from quotas.rules.cache import RulesCache

_engine: Engine | None = None
_engine_lock = threading.Lock()


def build_engine() -> Engine:
    """An engine configured from ``settings.QUOTAS``."""
    timeout = float(quota_settings.SOCKET_TIMEOUT)
    client = connect(quota_settings.REDIS_URL, timeout, connect_timeout=float(quota_settings.CONNECT_TIMEOUT))
    backend_path = quota_settings.RULES_BACKEND
    backend = import_string(backend_path)() if backend_path else None
    prefix = quota_settings.KEY_PREFIX
    rules = RulesCache(
        backend,
        client,
        rules_version_key(prefix),
        float(quota_settings.RULES_CHECK_INTERVAL),
        int(quota_settings.CLIENT_CACHE_SIZE),
    )
    engine = Engine(client, prefix, rules, int(quota_settings.LOCAL_DENY_CACHE_SIZE), int(quota_settings.KEY_BUCKETS))
    forget_refusals = rules.on_reload

    def forget() -> None:
        # A rules change (a lifted ban or failed-authentication block among them) reaches every process
        # this way: what it remembered is asked of Redis again.
        forget_refusals()
        failed_auth.clear()

    rules.on_reload = forget
    return engine


def get_engine() -> Engine:
    """This process's engine, built on first use."""
    global _engine
    engine = _engine
    if engine is None:
        with _engine_lock:
            if _engine is None:
                _engine = build_engine()
            engine = _engine
    return engine


def reset_engine() -> None:
    """Forget the engine (after a settings change); the next use builds a new one."""
    global _engine
    with _engine_lock:
        if _engine is not None:
            _engine.close()
        _engine = None
        failed_auth.clear()  # its blocks were learnt from the old engine's store
        shaping.budget.reset()  # its size may be a setting that just changed
