"""The system checks of the store ``REDIS_URL`` names: what only redis-py reads of a one-server URL, and the
memory store (``lupa`` missing, a production process on it, ``check --deploy``). None of them connects."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.core.checks import CheckMessage, Error, Tags, Warning, register

from quotas.checks.engine import error
from quotas.formats.store_urls import is_memory_url, validate_url
from quotas.settings import quota_settings
from quotas.settings.spec import SETTINGS
from quotas.store.opening import memory_store_available, memory_store_refused, url_problem


@register(Tags.compatibility)
def check_redis_url_options(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list[CheckMessage]:
    """quotas.E002 for what redis-py alone reads of a ``redis://``, ``rediss://`` or ``unix://`` ``REDIS_URL`` (an
    option's value, the scheme's case): the rest of the URL is checked with every setting (``check_settings``),
    which knows no redis, and a URL refused there is not reported twice."""
    url = quota_settings.REDIS_URL
    if not isinstance(url, str) or validate_url(url) is not None:
        return []
    problem = url_problem(url)
    if problem is None:
        return []
    setting = next(s for s in SETTINGS if s.name == "REDIS_URL")
    # The words of the setting's own check (quotas.settings.validators.redis_url); never the URL: it may hold a
    # password.
    return [Error(f"QUOTAS['REDIS_URL'] is not usable: {problem}.", hint=setting.full_hint(), id=setting.check_id)]


@register(Tags.compatibility)
def check_memory_store(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list[CheckMessage]:
    """quotas.E058: ``REDIS_URL = "memory://"`` without ``lupa``, which runs the Lua library in process."""
    if not is_memory_url(quota_settings.REDIS_URL) or memory_store_available():
        return []
    return [
        error(
            "QUOTAS['REDIS_URL'] names the memory store, which runs the quota scripts in this process with lupa, "
            "and lupa is not installed.",
            "pip install 'django-quota-platform[memory]' (or lupa), or point REDIS_URL at a Redis.",
            58,
        )
    ]


@register(Tags.compatibility)
def check_memory_store_in_production(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list[CheckMessage]:
    """quotas.E091: ``memory://`` with ``DEBUG`` off, outside tests, unless ``ALLOW_MEMORY_STORE_IN_PRODUCTION``.

    A deployment on it admits N times each limit and budget with N processes, and forgets them on restart.
    """
    if not memory_store_refused(quota_settings.REDIS_URL):  # the condition servers and Celery refuse to start on
        return []
    return [
        error(
            "QUOTAS['REDIS_URL'] is memory:// with DEBUG off: every process would keep its own counters (N "
            "processes admit N times each limit and budget) and forget them on restart.",
            "Point REDIS_URL at a Redis; memory:// is for tests and DEBUG development (or set "
            "QUOTAS['ALLOW_MEMORY_STORE_IN_PRODUCTION'] = True for one process that may forget).",
            91,
        )
    ]


@register(Tags.compatibility, deploy=True)
def check_memory_store_in_deployment(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list[CheckMessage]:
    """quotas.W006 (``check --deploy``): the memory store counts per process and forgets on restart."""
    if not is_memory_url(quota_settings.REDIS_URL):
        return []
    return [
        Warning(
            "QUOTAS['REDIS_URL'] is memory://: every process keeps its own counters, so N processes admit N times "
            "each limit and budget, and a restart forgets what was spent.",
            hint="Use the memory store for tests and single-process development; point REDIS_URL at a Redis in "
            "production.",
            id="quotas.W006",
        )
    ]
