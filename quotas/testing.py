"""Testing support for projects using the quota platform: pytest fixtures, and :func:`quotas.api.reset`.

In a project's ``conftest.py``::

    pytest_plugins = ["quotas.testing"]

then use the ``quota_reset`` fixture in a test (or autouse it) to start from
fresh counters, or set ``QUOTAS['ENABLED'] = False`` in the test settings to
take every limit out of the way. With ``QUOTAS['REDIS_URL'] = "memory://"``
(the memory store: no Redis), ``quota_clock`` moves time instead of sleeping.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from quotas.api import reset
from quotas.contract.urls import is_memory_url
from quotas.runtime import get_runtime
from quotas.settings import quota_settings
from quotas.store.opening import memory_keyspace


@pytest.fixture
def quota_reset() -> Iterator[None]:
    """Fresh counters and usage before the test, and none left behind after it (see :func:`quotas.api.reset`)."""
    reset(confirm=True, delete_usage=True)
    yield
    reset(confirm=True, delete_usage=True)


class QuotaClock:
    """The memory store's clock, which only :meth:`advance` moves: what its scripts read as the time.

    It starts at ``start`` (default: the real time, rounded down to a whole minute, so that a test's first
    requests share fixed windows). Moving it also makes this process forget the clients it remembers as
    refused (a refusal remembered until a retry time is a shortcut taken on the real clock).
    """

    def __init__(self, start: float | None = None) -> None:
        self.now = float(start if start is not None else time.time() // 60 * 60)

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move time ``seconds`` forward."""
        self.now += seconds
        get_runtime().guard.forget()


@pytest.fixture
def quota_clock() -> Iterator[QuotaClock]:
    """The memory store's clock for this test (``REDIS_URL = "memory://..."`` only): ``quota_clock.advance(60)``
    is a minute later for every limit, with no sleep."""
    url = str(quota_settings.REDIS_URL)
    if not is_memory_url(url):
        raise pytest.UsageError(f"quota_clock moves the memory store's clock: set QUOTAS['REDIS_URL'] to memory://, "
                                f"not {url.split(':', 1)[0]}://")  # fmt: skip
    store = memory_keyspace(url)
    clock, real = QuotaClock(), store.clock
    store.clock = clock
    try:
        yield clock
    finally:
        store.clock = real
