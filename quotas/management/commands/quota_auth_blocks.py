"""manage.py quota_auth_blocks [--all] [--lift KIND VALUE | --lift-tag TAG] [--json]"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from quotas.contract.keys import is_client_tag
from quotas.engine import default_engine
from quotas.exceptions import StoreUnavailable
from quotas.identity.auth_failures import KIND_TAG, kind_of
from quotas.identity.blocks import lift, list_blocks, tag_for


class Command(BaseCommand):
    help = (
        "List the clients blocked for failed authentications (addresses, usernames, trusted devices), "
        "or lift one block: --lift address 203.0.113.5, --lift username alice, or --lift-tag from the list."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--all", action="store_true", help="List every failure count, not only blocks.")
        parser.add_argument(
            "--lift", nargs=2, metavar=("KIND", "VALUE"), help=f"Lift a block; KIND is one of {', '.join(KIND_TAG)}."
        )
        parser.add_argument("--lift-tag", metavar="TAG", help="Lift the block of a tag as the list shows it.")
        parser.add_argument("--json", action="store_true", help="Print JSON instead of a table.")

    def handle(self, *args: Any, **options: Any) -> None:
        runtime = default_engine.runtime()
        try:
            if options["lift"] or options["lift_tag"]:
                self._lift(runtime, options)
            else:
                self._list(runtime, options)
        except StoreUnavailable as exc:
            raise CommandError(f"Redis is unreachable: {exc}") from None

    def _lift(self, runtime: Any, options: dict[str, Any]) -> None:
        if options["lift_tag"]:
            tag = options["lift_tag"].strip()
            tag = tag if tag.startswith("{") else "{" + tag + "}"
            if not is_client_tag(tag) or kind_of(tag) is None:
                raise CommandError(f"{options['lift_tag']!r} is not a failed-authentication tag (e.g. af.203.0.113.5).")
        else:
            kind, value = options["lift"]
            try:
                tag = tag_for(kind, value)
            except ValueError as exc:
                raise CommandError(f"--lift {kind} {value!r}: {exc}.") from None
        lifted = lift(runtime, tag)
        if options["json"]:
            self.stdout.write(json.dumps({"tag": tag, "lifted": lifted}))
        else:
            self.stdout.write(f"Lifted {tag}." if lifted else f"{tag} had no failures counted; nothing to lift.")

    def _list(self, runtime: Any, options: dict[str, Any]) -> None:
        blocks = list_blocks(runtime, blocked_only=not options["all"])
        if options["json"]:
            rows = [
                {"kind": b.kind, "tag": b.tag.strip("{}"), "failures": b.failures, "limit": b.limit,
                 "seconds_left": b.seconds_left, "blocked": b.blocked}
                for b in blocks
            ]  # fmt: skip
            self.stdout.write(json.dumps(rows))
            return
        if not blocks:
            self.stdout.write("No client is blocked for failed authentications." if not options["all"] else "None.")
            return
        self.stdout.write(f"{'KIND':<9} {'TAG':<40} {'FAILURES':>9} {'LEFT':>7}")
        for b in blocks:
            self.stdout.write(f"{b.kind:<9} {b.tag.strip('{}'):<40} {b.failures:>4}/{b.limit:<4} {b.seconds_left:>6}s")
