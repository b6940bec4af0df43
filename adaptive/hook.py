"""The project's own load signal (``QUOTAS['ADAPTIVE']['LOAD_HOOK']``).

``LOAD_HOOK`` names a callable by its dotted path. The controller calls it once per run, with no argument, in
the Celery worker that runs the controller; it returns the project's own load figure, a number >= 0 where 1.0
is at target (a queue's depth over the depth it should keep, a downstream API's latency over its budget...).
The figure is the ``hook`` signal and goes through the same control rule as the others, with the thresholds of
``SIGNALS['hook']``.

A hook must be quick: the run waits for it while holding its lock. A hook that raises, cannot be imported or
returns anything but a finite number >= 0 is logged and ignored for that run (the signal is unavailable,
never zero): a project's code never stops the controller. The system check ``adaptive.E020`` reports a path
that does not import, or does not name a callable, at start-up.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from typing import Any

from django.utils.module_loading import import_string

logger = logging.getLogger(__name__)


def read_hook(path: str | None) -> float | None:
    """The figure the callable at ``path`` returns now, or None when there is none or it misbehaves (logged)."""
    if not path:
        return None
    try:
        hook = import_string(path)
    except Exception:  # an import error, or any error raised by the module as it is imported
        logger.exception("adaptive: LOAD_HOOK %r cannot be imported; the hook signal is left out", path)
        return None
    try:
        value: Any = hook()
    except Exception:  # the project's code: whatever it raises, the controller goes on without it
        logger.exception("adaptive: LOAD_HOOK %r failed; the hook signal is left out of this run", path)
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        logger.warning("adaptive: LOAD_HOOK %r returned %.100r, not a load figure >= 0; left out", path, value)
        return None
    return float(value)


def check_hook(value: str | None, label: str) -> Iterator[str]:
    """A hook path that does not import, or names something that cannot be called."""
    if value is None:
        return
    try:
        hook = import_string(value)
    except Exception as exc:  # ImportError, or whatever the module raises as it is imported
        yield f"{label} = {value!r} does not import: {exc}."
        return
    if not callable(hook):
        yield f"{label} = {value!r} is not callable."
