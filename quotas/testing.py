"""Testing support for projects using the quota platform: pytest fixtures, a clock, and :func:`quotas.api.reset`.

In a project's ``conftest.py``::

    pytest_plugins = ["quotas.testing"]

then use the ``quota_reset`` fixture in a test (or autouse it) to start from
fresh counters, or set ``QUOTAS['ENABLED'] = False`` in the test settings to
take every limit out of the way. ``quota_clock`` stands the engine's clock
still and moves it when the test says (``quota_clock.advance(60)``), on the
memory store and on a Redis alike: no sleeping, no test that fails when it
happens to run across a minute's edge. :func:`use_clock` installs a clock of
one's own (a :class:`ManualClock` at a moment the test names).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from quotas.api import reset
from quotas.clock import Clock, ManualClock
from quotas.engine import Engine, default_engine

__all__ = ["ManualClock", "QuotaClock", "quota_clock", "quota_reset", "use_clock"]

#: The clock ``quota_clock`` gives (the name of earlier releases): see :class:`~quotas.clock.ManualClock`.
QuotaClock = ManualClock


@pytest.fixture
def quota_reset() -> Iterator[None]:
    """Fresh counters and usage before the test, and none left behind after it (see :func:`quotas.api.reset`)."""
    reset(confirm=True, delete_usage=True)
    yield
    reset(confirm=True, delete_usage=True)


@contextmanager
def use_clock(clock: Clock, engine: Engine = default_engine) -> Iterator[Clock]:
    """Run ``engine`` (the process's, by default) on ``clock`` inside the block (its runtime is rebuilt on it, and
    again on the system's clock after): every part reads it, allowances and the memory of refused clients included,
    and the decisions take its time rather than the Redis server's (the memory store's keys expire by it too)."""
    engine.use_clock(clock)
    try:
        yield clock
    finally:
        engine.use_clock(None)


@pytest.fixture
def quota_clock() -> Iterator[ManualClock]:
    """The engine's clock for this test, standing at the real time it started until the test moves it:
    ``quota_clock.advance(60)`` is a minute later for every limit, budget and remembered refusal, with no sleep;
    ``quota_clock.set(t)`` moves it to ``t`` (seconds since the epoch, never back). Any store: memory:// or a
    Redis."""
    with use_clock(ManualClock()) as clock:
        yield clock  # type: ignore[misc]
