"""Waiting for what runs on its own thread or process: the one place the tests poll the wall clock."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(condition: Callable[[], T], timeout: float, every: float = 0.05) -> T:
    """``condition()``'s first truthy value, asked every ``every`` seconds; its last (falsy) one after ``timeout``.

    For the progress of a background thread (the rules poller, the usage flusher, a test's HTTP receiver) or of
    another process: it runs on the real clock, so there is no clock to move, and the wait ends as soon as the
    condition holds.
    """
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            return value
        time.sleep(every)  # another thread's or process's progress: nothing here to move the clock of
    return value
