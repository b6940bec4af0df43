"""Settings of the end-to-end test's Celery worker, beat and gunicorn: the project's, with a fast controller.

Runs every half second and time constants of a second or two (half of what they were: the test took 5 s less,
and its waits have deadlines of 30 s), so that a burst of load and the recovery after it fit in a test. CPU is
the only signal, and these processes report none of their own (``REPORT_INTERVAL`` 0): the test publishes every
host's samples itself, through the reporters' path, so what the machine's other jobs do to its CPU never reaches
the controller.
"""

from config.settings import *  # noqa: F403
from config.settings import QUOTAS as PROJECT_QUOTAS

QUOTAS = dict(PROJECT_QUOTAS)
QUOTAS["ADAPTIVE"] = {
    **PROJECT_QUOTAS["ADAPTIVE"],
    "MODE": "enforce",
    "INTERVAL": 0.5,
    "REPORT_INTERVAL": 0,
    "SAMPLE_TTL": 5.0,
    "PUBLISH_TTL": 10.0,
    "SIGNALS": {"cpu": {"low": 0.7, "high": 0.9, "critical": 0.97}},
    "FAST_SECONDS": 0.5,
    "SLOW_SECONDS": 1.0,
    "DECREASE_FACTOR": 0.5,
    "DECREASE_COOLDOWN": 1.0,
    "RECOVERY_DELAY": 1.0,
    "RECOVERY_RATE": 0.5,
    "FLOORS": {"enterprise": 0.8, "pro": 0.3},
}
CELERY_BEAT_SCHEDULE = {
    "adaptive-control": {"task": "adaptive.control", "schedule": 0.5, "options": {"expires": 0.5}},
}
