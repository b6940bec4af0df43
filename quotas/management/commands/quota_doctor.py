"""manage.py quota_doctor [--json]"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from quotas.formats.store_urls import describe, redacted
from quotas.management.doctor import ERROR, examine, worst
from quotas.settings import quota_settings


class Command(BaseCommand):
    help = (
        "Check what the quotas need, each as ok, warning or error with one line of why: Redis (PING, version, "
        "topology), the Lua library on every primary, the clocks of this machine and Redis, the rules version and "
        "snapshot, and the system checks of the quotas apps. Exits with status 1 when any check is an error."
    )
    # The doctor runs the system checks itself and reports them with the rest: an error among them must not
    # stop it before it has said anything.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="Print JSON instead of text.")

    def handle(self, *args: Any, **options: Any) -> None:
        url = str(quota_settings.REDIS_URL)
        findings = examine()
        status = worst(findings)
        if options["json"]:
            report = {
                "status": status,
                "redis_url": redacted(url),
                "topology": describe(url),
                "checks": [f.as_dict() for f in findings],
            }
            self.stdout.write(json.dumps(report))
        else:
            self.stdout.write(f"Redis: {redacted(url)}")
            width = max(len(f.name) for f in findings)
            for f in findings:
                self.stdout.write(f"{f.status:<8} {f.name:<{width}}  {f.detail}")
        failed = [f.name for f in findings if f.status == ERROR]
        if failed:
            raise CommandError(f"{len(failed)} check(s) failed: {', '.join(failed)}.")
