"""What a Celery worker or beat checks as it starts: the memory store is refused in production (quotas.E091).

gunicorn and other servers are refused by the quota middleware as they load the application
(:mod:`quotas.http.hybrid`). A Celery worker runs the system checks at start but does not heed their result, and
beat never opens the quota store at all, so both would run on ``memory://`` (each worker counting alone) without
a word. :func:`connect_celery` connects Celery's public ``worker_init`` and ``beat_init`` signals to
:func:`refuse_in_celery`, which stops the process with one line on stderr.
"""

from __future__ import annotations

import sys
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from quotas.store.opening import refuse_memory_store_in_production


def refuse_in_celery(**kwargs: Any) -> None:
    """Stop this Celery process when it may not run on its store (see
    :func:`~quotas.store.opening.refuse_memory_store_in_production`).

    Raises ``SystemExit`` with the reason: Celery logs an exception a signal receiver raises and carries on, so
    ``ImproperlyConfigured`` would stop nothing; ``SystemExit`` ends the process with status 1 and the line.
    """
    try:
        refuse_memory_store_in_production()
    except ImproperlyConfigured as exc:
        raise SystemExit(f"ImproperlyConfigured: {exc}") from exc


def connect_celery() -> None:
    """Connect :func:`refuse_in_celery` to Celery's ``worker_init`` and ``beat_init``, in a process that has
    imported Celery (a worker or beat has, before Django sets up its apps; other processes need not import it)."""
    if "celery" not in sys.modules:
        return
    from celery import signals

    signals.worker_init.connect(refuse_in_celery, weak=False, dispatch_uid="quotas-memory-store-worker")
    signals.beat_init.connect(refuse_in_celery, weak=False, dispatch_uid="quotas-memory-store-beat")
