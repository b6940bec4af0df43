"""manage.py quota_reset <client> [--window NAME] [--keep-spending] [--json]"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from quotas.management.operations import (
    CLIENT_HELP,
    Named,
    command_runtime,
    current_rules,
    plan_windows,
    redis_errors,
    resolve_client,
)
from quotas.rules.limits import Window
from quotas.rules.snapshot import RuleSet


class Command(BaseCommand):
    help = (
        "Reset one client's counters: every window it has, with its ban and refusal count, or with --window only "
        "the windows of that policy name; then bump the rules version, so that every process forgets what it "
        "remembers of the client (refusals, bans, allowances) within about a second. A reset of every window "
        "sets the spending of its budgets in the current day and month back to zero too, unless "
        "--keep-spending. Its usage and its last refusals stay. " + CLIENT_HELP
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("client", help="s.12, subscription:12, u.5, user:5, ip.203.0.113.9 or 203.0.113.9.")
        parser.add_argument(
            "--window", metavar="NAME", help="Reset only the windows with this policy name (quota_status lists them)."
        )
        parser.add_argument(
            "--keep-spending",
            action="store_true",
            help="Keep what the client spent of its budgets (money) in the current day and month.",
        )
        parser.add_argument("--json", action="store_true", help="Print JSON instead of text.")

    def handle(self, *args: Any, **options: Any) -> None:
        name = options["window"]
        with redis_errors():
            runtime = command_runtime()
            named = resolve_client(options["client"], runtime.rules)
            rules = current_rules(runtime)
            windows = None if name is None else windows_named(named, rules, name)
            kept = budgets_of(named, rules) if options["keep_spending"] else []
            deleted = runtime.reset_client(named.client.tag, windows, keep=kept)
            version = runtime.store.rules_version.read()
        if options["json"]:
            report = {
                "client": named.label, "window": name, "deleted": deleted, "rules_version": version,
                "budgets_kept": sorted(w.policy for w in kept),
            }  # fmt: skip
            self.stdout.write(json.dumps(report))
            return
        what = f"window {name!r} of {named.label}" if name is not None else named.label
        if named.note:
            self.stdout.write(f"{named.note}.")
        if deleted:
            self.stdout.write(f"Reset {what}: {deleted} field(s) and key(s) deleted.")
        else:
            self.stdout.write(f"Nothing to reset for {what}: Redis holds no counter of it.")
        if kept:
            self.stdout.write(f"Budget spending kept: {', '.join(sorted(w.policy for w in kept))}.")
        elif name is None and deleted:
            self.stdout.write("Budget spending of the current periods was reset too (--keep-spending keeps it).")
        self.stdout.write(
            f"Rules version now {version}: every process forgets what it remembers of {named.label} "
            "within about a second."
        )


def budgets_of(named: Named, rules: RuleSet) -> list[Window]:
    """The money budgets that apply to the client now (its plan's and its own)."""
    return [w for w in plan_windows(named.client, rules) if w.is_budget]


def windows_named(named: Named, rules: RuleSet, name: str) -> list[Window]:
    """The windows of the client's plan whose policy name is ``name``; :class:`CommandError` when there is none."""
    windows = plan_windows(named.client, rules)
    found = [w for w in windows if w.policy == name]
    if not found:
        names = ", ".join(sorted({w.policy for w in windows}))
        have = f"its plan's windows are: {names}" if names else "no plan limit applies to it"
        raise CommandError(f"{named.label} has no window named {name!r}; {have}.")
    return found
