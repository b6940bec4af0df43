"""Keeping make bench's races inside one fixed window (the tests move the memory store's clock instead)."""

from __future__ import annotations

import time


def avoid_window_edge(window: int, needed: float, offset: float = 0.0) -> None:
    """Sleep, if needed, so that the next ``needed`` seconds lie in one aligned window.

    Fixed windows are aligned to the epoch (django-ratelimit's are shifted by
    ``offset`` seconds); an experiment that straddles an edge legitimately
    gets a second quota, which would read as over-admission. The bench Redis
    runs on this machine, so its clock is this clock.
    """
    left = window - (time.time() - offset) % window
    if left < needed:
        time.sleep(left + 0.05)
