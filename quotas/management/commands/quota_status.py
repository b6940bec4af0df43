"""manage.py quota_status <client> [--json]"""

from __future__ import annotations

import json
import math
import time
from datetime import UTC, datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from quotas.formats.money import format_money
from quotas.management.operations import (
    CLIENT_HELP,
    Named,
    command_runtime,
    current_rules,
    redis_errors,
    resolve_client,
)
from quotas.observability.refusals import read_refusals
from quotas.rules.snapshot import RuleSet
from quotas.runtime import Runtime
from quotas.standing import current_standing


class Command(BaseCommand):
    help = (
        "Show where a client stands: its plan, every window of its plan's limits (quota, used, remaining, reset; "
        "read with a peek, which consumes nothing), its ban, its last refusals, and the local allowances this "
        "process holds for it. " + CLIENT_HELP
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("client", help="s.12, subscription:12, u.5, user:5, ip.203.0.113.9 or 203.0.113.9.")
        parser.add_argument("--json", action="store_true", help="Print JSON instead of text.")

    def handle(self, *args: Any, **options: Any) -> None:
        with redis_errors():
            runtime = command_runtime()
            rules = current_rules(runtime)
            named = resolve_client(options["client"], runtime.rules)
            report = status(named, rules, runtime)
        if options["json"]:
            self.stdout.write(json.dumps(report))
        else:
            self.stdout.write("\n".join(text_lines(report)))


def status(named: Named, rules: RuleSet, runtime: Runtime) -> dict[str, Any]:
    """The client's standing as JSON-ready data (see "Operations commands" in docs/operations.md).

    Raises :class:`~quotas.exceptions.StoreUnavailable` when Redis fails.
    """
    client = named.client
    standing = current_standing(client, rules, runtime)
    for limit in standing["limits"]:
        # What the window holds against the client now: for a rolling window, the quota less what is left.
        limit["used"] = max(0, limit["quota"] - limit["remaining"])
    ban = runtime.store.ban(client.tag)
    return {
        "client": named.label,
        "kind": client.kind,
        "note": named.note or None,
        "plan": standing["plan"]["slug"] if standing["plan"] else None,
        "limits": standing["limits"],
        "budgets": standing["budgets"],
        "ban": None
        if ban is None
        else {"until": _iso(ban.until), "seconds_left": math.ceil(ban.seconds_left), "strikes": ban.strikes},
        "refusals": read_refusals(runtime.store.refusals, client.tag),
        "allowances": _allowances(runtime, client.tag),
    }


def _allowances(runtime: Runtime, tag: str) -> list[dict[str, Any]] | str:
    """What this process holds for ``tag`` ("n/a" with allowances off): in a shell, usually nothing."""
    allowances = runtime.guard.allowances
    if allowances is None:
        return "n/a"
    now = time.monotonic()
    return [
        {
            "windows": [s.window.policy for s in held.granted.states],
            "size": held.size,
            "used": held.used,
            "seconds_left": round(max(0.0, held.ends_at - now), 3),
        }
        for held in allowances.held(tag)
    ]


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds")


def text_lines(report: dict[str, Any]) -> list[str]:
    """The report as a page of text: a few labelled lines, then a table per section."""
    lines = [f"Client:  {report['client']} ({report['kind']})"]
    if report["note"]:
        lines.append(f"         {report['note']}")
    lines.append(f"Plan:    {report['plan'] or 'none'}")
    ban = report["ban"]
    if ban:
        lines.append(f"Banned:  until {ban['until']} ({ban['seconds_left']} s left, strike {ban['strikes']})")
    else:
        lines.append("Banned:  no")
    cut = {w["multiplier"] for w in report["limits"] if w["multiplier"] != 1.0}
    if cut:
        lines.append(f"Load:    the adaptive multiplier {min(cut):.2f} cuts the plan's rates (QUOTA: the one in force)")
    lines += _limit_lines(report["limits"], report["budgets"])
    lines += _refusal_lines(report["refusals"])
    allowances = report["allowances"]
    if allowances == "n/a":
        lines.append("Allowances held by this process: n/a (QUOTAS['ALLOWANCES'] is off)")
    else:
        lines.append(f"Allowances held by this process: {len(allowances) or 'none'}")
        for held in allowances:
            windows = ", ".join(held["windows"])
            lines.append(f"  {windows}: {held['used']} of {held['size']} used, {held['seconds_left']} s left")
    return lines


def _limit_lines(limits: list[dict[str, Any]], budgets: list[dict[str, Any]]) -> list[str]:
    if not limits and not budgets:
        return ["Limits:  none (no plan limit applies to this client)"]
    lines = ["Limits:", f"  {'POLICY':<24} {'ALGORITHM':<22} {'QUOTA':>9} {'USED':>9} {'REMAINING':>9} {'RESET':>8}"]
    lines += [
        f"  {w['name']:<24} {w['algorithm']:<22} {_quota(w):>9} {w['used']:>9} {w['remaining']:>9} {w['reset']:>7}s"
        for w in limits
    ]
    if budgets:
        lines.append(f"  {'BUDGET':<24} {'PERIOD':<22} {'SPENT':>14} {'AMOUNT':>14} {'REMAINING':>14}  RESETS AT")
        lines += [
            f"  {b['name']:<24} {b['period']:<22} {format_money(b['spent'], b['currency']):>14} "
            f"{format_money(b['amount'], b['currency']):>14} {format_money(b['remaining'], b['currency']):>14}  "
            f"{b['resets_at']}"
            for b in budgets
        ]
    return lines


def _refusal_lines(refusals: list[dict[str, Any]]) -> list[str]:
    if not refusals:
        return ["Last refusals: none"]
    lines = ["Last refusals (newest first):"]
    for record in refusals:
        acl = f"access-list entry {record['acl_entry']}" if "acl_entry" in record else ""
        windows = ", ".join(w["policy"] for w in record.get("windows", [])) or acl
        retry = record.get("retry_after")
        lines.append(
            f"  {record['time']}  {record['reason']:<9} {windows}" + (f"  retry after {retry} s" if retry else "")
        )
    return lines


def _quota(limit: dict[str, Any]) -> str:
    """The quota in force, with the plan's beside it when the adaptive multiplier cuts it ("2 of 10")."""
    if limit["quota"] == limit["plan_quota"]:
        return str(limit["quota"])
    return f"{limit['quota']} of {limit['plan_quota']}"
