"""gunicorn settings: ``gunicorn -c config/gunicorn.py config.wsgi:application`` (the Procfile's ``web``).

Only what multi-process Prometheus metrics need, from the hooks the package ships (:mod:`quotas.gunicorn`, as a
project's own ``gunicorn.conf.py`` takes them); bind, workers and timeouts stay on the command line. The metrics
directory is ``$RUN_DIR/prometheus``: ``run/prometheus`` in the checkout, where ``make run`` starts.
"""

from __future__ import annotations

import os
from pathlib import Path

# Before quotas.gunicorn picks its default: the checkout's run/ whatever directory gunicorn starts in.
os.environ.setdefault("RUN_DIR", str(Path(__file__).resolve().parent.parent / "run"))

from quotas.gunicorn import child_exit, clean_stale_metrics, on_starting

__all__ = ["child_exit", "clean_stale_metrics", "on_starting"]
