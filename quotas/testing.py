"""Testing support for projects using the quota platform: a pytest fixture, and :func:`quotas.api.reset`.

In a project's ``conftest.py``::

    pytest_plugins = ["quotas.testing"]

then use the ``quota_reset`` fixture in a test (or autouse it) to start from
fresh counters, or set ``QUOTAS['ENABLED'] = False`` in the test settings to
take every limit out of the way.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from quotas.api import reset


@pytest.fixture
def quota_reset() -> Iterator[None]:
    """Fresh counters and usage before the test, and none left behind after it (see :func:`quotas.api.reset`)."""
    reset(confirm=True, delete_usage=True)
    yield
    reset(confirm=True, delete_usage=True)
