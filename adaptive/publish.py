"""The multipliers the controller publishes, and how the engine reads them.

One JSON key, ``<KEY_PREFIX>:adaptive:multipliers``::

    {"1": 0.45, "2": 0.8, "3": 1.0, "updated_at": 1795315810.25}

one entry per plan id (every plan is listed, 1.0 when it is not reduced) plus the controller's time.
The key expires after ``PUBLISH_TTL`` seconds, so if the controller stops, limits return to normal.
"""

from __future__ import annotations

from collections.abc import Mapping

from quotas.internal_api import ControllerBoard


def publish_multipliers(board: ControllerBoard, multipliers: Mapping[int, float], now: float, ttl: float) -> None:
    """Replace the published multipliers (valid for ``ttl`` seconds)."""
    board.multipliers.publish(multipliers, now, ttl)


def read_multipliers(board: ControllerBoard) -> dict[int, float]:
    """The published multipliers by plan id; ``{}`` when none are published (every plan at 1.0).

    Read with the engine's own parser (quotas.formats.multipliers.parse_multipliers), so the two never disagree
    on what counts. Raises :class:`~quotas.exceptions.StoreUnavailable` when Redis cannot be read.
    """
    return board.multipliers.read()
