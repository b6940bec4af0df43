"""Each web process publishes its host's load to Redis from a daemon thread, off the request path.

:func:`ensure_reporter` is what :class:`adaptive.middleware.LoadReporterMiddleware` calls on every
request: after the first request of a process it is one ``os.getpid()`` comparison. Threads do not
survive ``fork()``, so a forked gunicorn worker starts its own. The thread publishes at most once per
``REPORT_INTERVAL`` (>= 1 s) with a ``SAMPLE_TTL`` expiry: a process that stops reporting drops out.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Mapping
from typing import Any

from quotas.exceptions import StoreUnavailable
from quotas.internal_api import ControllerBoard

from . import store
from .conf import HOST_SIGNALS, adaptive_settings
from .load import CpuMeter, host_name, host_sample
from .responses import RESPONSES, drain, interval_signals

logger = logging.getLogger(__name__)


def publish_sample(board: ControllerBoard, sample: Mapping[str, Any], ttl: float) -> float:
    """Store one process's ``sample`` for ``ttl`` seconds; returns the round trip in milliseconds."""
    started = time.perf_counter()
    board.publish_sample(str(sample["host"]), int(sample["pid"]), json.dumps(sample), ttl)
    return (time.perf_counter() - started) * 1000


def read_samples(board: ControllerBoard, now: float, forget_after: float = 600.0) -> list[dict[str, Any]]:
    """Every live sample. Names of keys expired for ``forget_after`` seconds leave the index."""
    samples = []
    for raw in board.samples(now, forget_after):
        try:
            sample = json.loads(raw)
        except ValueError:
            logger.warning("adaptive: unreadable load sample %r", raw[:100])
            continue
        if isinstance(sample, dict):
            samples.append(sample)
    return samples


class LoadReporter:
    """The daemon thread of one process (see the module docstring)."""

    def __init__(self) -> None:
        self._pid: int | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.thread: threading.Thread | None = None
        #: The sample this process published last (None before the first): what /metrics shows of this host
        #: until the controller has exported its own reading (see signal_series).
        self.last_sample: dict[str, Any] | None = None

    def ensure_started(self) -> None:
        if self._pid == os.getpid():
            return
        with self._lock:
            if self._pid == os.getpid():
                return
            self._pid = os.getpid()
            if float(adaptive_settings.REPORT_INTERVAL) <= 0:
                return  # reporting is off in this process
            self._stop = threading.Event()
            self.thread = threading.Thread(target=self._run, args=(self._stop,), name="adaptive-load", daemon=True)
            self.thread.start()

    def stop(self) -> None:
        """Stop the thread; the next :meth:`ensure_started` looks at the settings again."""
        with self._lock:
            self._stop.set()
            self._pid = None
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(timeout=5)

    def _run(self, stop: threading.Event) -> None:
        cpu = CpuMeter()  # the first reading covers the first interval
        drain(RESPONSES)  # responses served before this thread (or while reporting was off) are no interval's
        latency: float | None = None
        while True:
            interval = max(1.0, float(adaptive_settings.REPORT_INTERVAL))
            if stop.wait(interval):
                return
            try:
                sample = {**host_sample(cpu, latency), **interval_signals()}
                self.last_sample = sample
                latency = publish_sample(store.get_board(), sample, float(adaptive_settings.SAMPLE_TTL))
            except StoreUnavailable as exc:
                latency = None
                logger.warning("adaptive: load sample not published: %s", exc)
            except Exception:  # the thread must outlive any surprise; the next interval tries again
                logger.exception("adaptive: load sample failed")


_reporter = LoadReporter()


def ensure_reporter() -> None:
    """Start this process's reporter thread if it is not running (cheap after the first call)."""
    _reporter.ensure_started()


def stop_reporter() -> None:
    """Stop this process's reporter thread (tests; settings changes)."""
    _reporter.stop()


def signal_series() -> list[tuple[dict[str, str], float]]:
    """This host's load signals for /metrics until the controller exports them: every signal the controller
    reads (``SIGNALS``) that hosts report, at this process's last published reading, or at 0 before its first or
    where it has none. ``hook`` is the controller's own reading: it exports it.

    Registered in :meth:`adaptive.apps.AdaptiveAppConfig.ready` with
    :func:`quotas.metrics_exposition.add_default_series`.
    """
    sample = _reporter.last_sample or {}
    host = str(sample.get("host") or host_name())
    series = []
    for name in adaptive_settings.SIGNALS:
        if name not in HOST_SIGNALS:
            continue
        value = sample.get(name)
        reading = float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0
        series.append(({"signal": name, "host": host}, reading))
    return series
