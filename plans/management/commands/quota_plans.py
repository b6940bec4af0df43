"""manage.py quota_plans export [--format yaml|json] [-o FILE] | apply FILE [--dry-run] [--prune]"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError

from plans.plansfile import DELETED, FORMATS, KEPT, PlansFileError, apply_text, export_text, format_of


class Command(BaseCommand):
    help = (
        "Plans as code: export the plans (with their limits, period quotas and budgets) and the group plans to a "
        "YAML or JSON file, or apply such a file. Subscriptions, keys, caps and overrides are the customers' and "
        "are neither exported nor changed."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="{export,apply}")
        export = actions.add_parser("export", help="Write the plans as a file (to standard output by default).")
        export.add_argument("--format", choices=FORMATS, default="yaml", help="Default: yaml.")
        export.add_argument("-o", "--output", help="The file to write (replaced).")
        apply = actions.add_parser(
            "apply",
            help="Check a plans file, print what it changes, and apply it in one transaction. Plans and group "
            "plans absent from the file are left alone unless --prune.",
        )
        apply.add_argument("file", help="A .yaml, .yml or .json file ('-': standard input, YAML unless --format).")
        apply.add_argument("--format", choices=FORMATS, help="Default: from the file's name (.json, else yaml).")
        apply.add_argument("--dry-run", action="store_true", help="Print what would change; change nothing.")
        apply.add_argument(
            "--prune", action="store_true", help="Delete the plans and group plans the file does not name."
        )

    def handle(self, *args: Any, action: str, **options: Any) -> None:
        if action == "export":
            self.export(options["format"], options["output"])
        else:
            self.apply(options["file"], options["format"], dry_run=options["dry_run"], prune=options["prune"])

    def export(self, file_format: str, output: str | None) -> None:
        try:
            text = export_text(file_format)
        except (ImportError, DatabaseError) as exc:
            raise CommandError(str(exc)) from None
        if output is None:
            self.stdout.write(text, ending="")
            return
        try:
            Path(output).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"Cannot write {output}: {exc.strerror or exc}.") from None

    def apply(self, path: str, file_format: str | None, *, dry_run: bool, prune: bool) -> None:
        name = "<stdin>" if path == "-" else path
        try:
            text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"Cannot read {name}: {getattr(exc, 'strerror', None) or exc}.") from None
        try:
            changes = apply_text(text, file_format or format_of(path), prune=prune, dry_run=dry_run)
        except ImportError as exc:
            raise CommandError(str(exc)) from None
        except DatabaseError as exc:  # the checks passed, and the database refused all the same
            raise CommandError(f"{name}: the database refused a change ({exc}); nothing changed.") from None
        except PlansFileError as exc:
            lines = [problem.render(name) for problem in exc.problems]
            raise CommandError("\n".join([f"{name}: {len(lines)} problem(s), nothing changed:", *lines])) from None
        for change in changes:
            self.stdout.write("\n".join(change.lines()))
        made = [change for change in changes if change.action != KEPT]
        if not made:
            self.stdout.write("No changes.")
        elif dry_run:
            self.stdout.write(f"Dry run: {len(made)} change(s) not applied.")
        else:
            deleted = sum(change.action == DELETED for change in made)
            self.stdout.write(f"Applied {len(made)} change(s) ({deleted} deletion(s)).")
