"""Settings of the end-to-end test's Celery worker, beat and gunicorn: the project's, with a fast controller.

Runs of one second and time constants of a few seconds, so that a burst of load and the recovery after it fit
in a test. CPU is the only signal, and these processes report none of their own (``REPORT_INTERVAL`` 0): the
test publishes every host's samples itself, through the reporters' path, so what the machine's other jobs do
to its CPU never reaches the controller.
"""

from config.settings import *  # noqa: F403
from config.settings import QUOTAS as PROJECT_QUOTAS

QUOTAS = dict(PROJECT_QUOTAS)
QUOTAS["ADAPTIVE"] = {
    **PROJECT_QUOTAS["ADAPTIVE"],
    "MODE": "enforce",
    "INTERVAL": 1.0,
    "REPORT_INTERVAL": 0,
    "SAMPLE_TTL": 5.0,
    "PUBLISH_TTL": 10.0,
    "SIGNALS": {"cpu": {"low": 0.7, "high": 0.9, "critical": 0.97}},
    "FAST_SECONDS": 1.0,
    "SLOW_SECONDS": 2.0,
    "DECREASE_FACTOR": 0.5,
    "DECREASE_COOLDOWN": 2.0,
    "RECOVERY_DELAY": 2.0,
    "RECOVERY_RATE": 0.25,
    "FLOORS": {"enterprise": 0.8, "pro": 0.3},
}
CELERY_BEAT_SCHEDULE = {
    "adaptive-control": {"task": "adaptive.control", "schedule": 1.0, "options": {"expires": 1.0}},
}
