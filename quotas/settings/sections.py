"""The engine's settings that are dicts of their own (``QUOTAS['METRICS']``, ``['USAGE_FLUSH']``,
``['RETENTION']``, ``['ALLOWANCES']``), described key by key as :mod:`quotas.settings.spec` describes the rest;
``spec.SETTINGS`` names each as a section."""

from __future__ import annotations

from .setting import Setting

#: The kind of a setting given in seconds, as its check's message names it.
SECONDS = "a number of seconds"

#: QUOTAS['METRICS']: /metrics and the details of /healthz (quotas/http/views.py).
METRICS = (
    Setting(
        "TOKEN", str, "", secret=True, check_id="quotas.E035",
        doc="bearer token for `/metrics` and `/healthz`'s details; `''`: staff sessions only, unless "
        "`ALLOW_LOOPBACK`. Read it from the environment, never write it in the repository (this project: "
        "`METRICS_TOKEN`)",
        hint="Read it from the environment, e.g. os.environ.get('METRICS_TOKEN', ''); '' means no token.",
    ),
    # Off by default: a reverse proxy on the same host that adds no X-Forwarded-For (nginx's default)
    # would make every client look local.
    Setting(
        "ALLOW_LOOPBACK", bool, False, check_id="quotas.E015",
        doc="serve `/metrics` without a token to loopback peers when no `TOKEN` is set; keep off behind a "
        "reverse proxy on the same host",
        hint="Without it /metrics needs QUOTAS['METRICS']['TOKEN'] or a staff session.",
    ),
)  # fmt: skip

#: QUOTAS['USAGE_FLUSH']: the usage app's flush of Redis counters to the database (usage/flush.py).
USAGE_FLUSH = (
    Setting(
        "BATCH_SIZE", int, 500, minimum=1, check_id="quotas.E036",
        doc="usage hashes written per database transaction",
        hint="Fewer per transaction hold locks for less time; more write faster.",
    ),
    Setting(
        "BATCH_DELAY", float, 0.0, minimum=0, kind=SECONDS, check_id="quotas.E036",
        doc="seconds each batch's transaction pauses: a test hook (the worker-kill test widens the window a "
        "SIGKILL lands in); leave it at 0",
        hint="A test hook: leave it at 0 in production.",
    ),
)  # fmt: skip

#: QUOTAS['RETENTION']: how long the tables that grow with traffic keep their rows (the usage app's
#: ``usage.prune`` task, usage/retention.py).
RETENTION = (
    Setting(
        "USAGE_DAYS", int | None, 400, minimum=1, kind="a number of days or None", check_id="quotas.E056",
        doc="days a usage record is kept after its day (400: a year of billing history, and a month to dispute "
        "the last invoice); `None`: forever",
        hint="Keep it longer than your billing and dispute period; None keeps every row.",
    ),
    Setting(
        "BUDGET_ALERTS_DAYS", int | None, 400, minimum=1, kind="a number of days or None", check_id="quotas.E056",
        doc="days a budget alert is kept after it was raised; `None`: forever",
        hint="A number of days, or None to keep every alert.",
    ),
    Setting(
        "BANS_DAYS", int | None, 90, minimum=1, kind="a number of days or None", check_id="quotas.E056",
        doc="days a ban's record is kept after the ban ended or was lifted; `None`: forever",
        hint="A number of days, or None to keep every ban record.",
    ),
)  # fmt: skip

#: QUOTAS['ALLOWANCES']: local allowances for busy clients (quotas/store/allowances.py). On by default, with
#: thresholds that only a client sending one process many requests a second meets.
ALLOWANCES = (
    Setting(
        "ENABLED", bool, True, check_id="quotas.E053",
        doc="take allowances for busy clients; `False`: every request asks Redis (each plan can also turn them "
        "off: *Local allowances* in its admin)",
        hint="True or False.",
    ),
    Setting(
        "MIN_RATE", float, 20.0, exclusive_minimum=0, kind="requests a second", check_id="quotas.E053",
        doc="requests a second one client must send this process before its decisions take allowances",
        hint="A positive number of requests a second, e.g. 20.",
    ),
    Setting(
        "HORIZON", float, 0.25, exclusive_minimum=0, maximum=1, kind=SECONDS, check_id="quotas.E053",
        doc="how long an allowance may be used, and how many requests it holds: the client's rate here times "
        "this. Its unused units go back when it ends",
        hint="Well under a second, e.g. 0.25: longer holds more units back from other processes.",
    ),
    Setting(
        "SHARE", float, 0.1, exclusive_minimum=0, maximum=0.5, kind="a fraction", check_id="quotas.E053",
        doc="the largest part of any window's remaining units one allowance may take",
        hint="A fraction up to 0.5, e.g. 0.1: smaller leaves more for other processes.",
    ),
    Setting(
        "MAX_REQUESTS", int, 50, minimum=2, check_id="quotas.E053",
        doc="the most requests one allowance admits",
        hint="An integer of at least 2.",
    ),
)  # fmt: skip
