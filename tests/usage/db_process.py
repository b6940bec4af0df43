"""A project process on another database than the test session's: ``python -m tests.usage.db_process COMMAND``.

Run by :class:`tests.usage.mariadb.MariaDB` with ``DATABASE_URL`` (and ``REDIS_URL``) in its
environment, as a Celery worker of a project on that database would be. It prints one JSON object
on its last line of output.

Commands:

* ``migrate``: the migrations of the apps the flush writes to (auth, plans, usage);
* ``reset [FIXTURE]``: empty every table, then load ``FIXTURE`` (``dumpdata`` output) if given;
* ``flush``: one :func:`usage.flush.flush_usage`; prints its report and every usage row;
* ``write STEPS``: :func:`usage.flush.write_rows` once per step of the JSON file ``STEPS``
  (``[{"observed_at": ISO, "rows": [{"client", "plan_key", "scope", "day", "generation", "counters"}]}]``);
  prints each step's count of rows written and the rows after it.

Commands joined by ``+`` run one after the other in the one process, which prints the last one's JSON
(``reset FIXTURE + flush``): a Django start-up (a second or two of CPU) less than a process each.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from datetime import date, datetime
from pathlib import Path
from typing import Any

import django


def rows() -> list[dict[str, Any]]:
    """Every usage row as the ORM reads it back, in a stable order."""
    from usage.models import COUNTERS, UsageRecord

    fields = ("client", "plan_key", "scope", "day", "generation", "subscription_id", "plan_id", *COUNTERS)
    records = UsageRecord.objects.order_by("client", "scope", "generation").values(*fields, "observed_at")
    return [{**r, "day": r["day"].isoformat(), "observed_at": r["observed_at"].isoformat()} for r in records]


def migrate() -> dict[str, Any]:
    from django.core.management import call_command

    # Not every app: the adaptive app's first migration does not apply on MySQL or MariaDB (its singleton
    # check constraint is on the auto-increment id, which they refuse). auth first: its later migrations
    # widen the columns its post-migrate step fills.
    for app in ("auth", "quota_plans", "quota_usage"):
        call_command("migrate", app, interactive=False, verbosity=0, skip_checks=True)
    return {"migrated": True}


def reset(fixture: str | None = None) -> dict[str, Any]:
    from django.core.management import call_command

    call_command("flush", interactive=False, verbosity=0)
    if fixture:
        call_command("loaddata", fixture, verbosity=0)
    return {"rows": rows()}


def flush() -> dict[str, Any]:
    from usage.flush import flush_usage

    report = flush_usage()
    return {"report": {k: v for k, v in asdict(report).items() if k not in ("days", "seconds")}, "rows": rows()}


def write(steps_file: str) -> dict[str, Any]:
    from quotas.store.usage_hash_format import RowKey
    from usage.flush import write_rows

    done = []
    for step in json.loads(Path(steps_file).read_text()):
        batch = {
            RowKey(r["client"], r["plan_key"], r["scope"], date.fromisoformat(r["day"]), r["generation"]): r["counters"]
            for r in step["rows"]
        }
        written = write_rows(batch, datetime.fromisoformat(step["observed_at"]))
        done.append({"written": written, "rows": rows()})
    return {"steps": done}


COMMANDS = {"migrate": migrate, "reset": reset, "flush": flush, "write": write}


def commands(argv: list[str]) -> list[list[str]]:
    """``argv`` split at each ``+``: one ``[command, *args]`` per command."""
    chain: list[list[str]] = [[]]
    for word in argv:
        if word == "+":
            chain.append([])
        else:
            chain[-1].append(word)
    return chain


if __name__ == "__main__":
    django.setup()
    for command, *args in commands(sys.argv[1:]):
        result = COMMANDS[command](*args)
    print(json.dumps(result))
