"""What a decision leaves behind for operators: one metric sample and a history note (one append to the
ledger, counted off the request path: quotas/observability/ledger.py), and audit lines for refusals and bans."""

from __future__ import annotations

import time
from typing import Any

from quotas.formats.acl import ACLRule
from quotas.observability import otel
from quotas.observability.history import History
from quotas.observability.ledger import FOLD_AT, LEDGER
from quotas.observability.logs import log_ban, log_denial, summarize_decision
from quotas.observability.refusals import RefusalLog
from quotas.settings import quota_settings
from quotas.store.decision import Decision

# The ledger's list, and its bound method: a decision's bookkeeping is one call of a builtin (see record_decision).
_entries = LEDGER.entries
_append = _entries.append


def labels(decision: Decision) -> tuple[str, str]:
    """(outcome, reason) of a decision, as the metrics label them."""
    if decision.allowed:
        return ("shadow_denied", "none") if decision.would_deny() else ("allowed", "none")
    if decision.banned or decision.ban_started:
        return "denied", "banned"
    if decision.local and not decision.fallback:
        return "denied", "local"
    if decision.reduced_only:
        return "denied", "capacity"
    if decision.budget_denied:
        return "denied", "budget"
    return "denied", "rate"


# Keyword-only beyond the decision: what the service knows of one decision, each read by one record.
def record_decision(  # noqa: PLR0913
    request: Any,
    decision: Decision,
    *,
    client_tag: str,
    plan: str | None,
    scope: str,
    started: float,
    history: History | None = None,
    refusals: RefusalLog | None = None,
    store_seconds: float = 0.0,
    shadow_denied: bool | None = None,
) -> None:
    """Count the decision (metrics, OpenTelemetry when on, and the runtime's ``history``), and write audit
    lines for a refusal (noted in the runtime's ``refusals`` too) or a new ban. ``store_seconds``: the time
    the store call took (0 when none was made); ``shadow_denied``: whether a shadow window would have refused
    it, when the caller knows (None: read from the decision)."""
    if decision.allowed:  # labels(decision) inlined for the common case: one product call fewer a request
        if shadow_denied is None:
            shadow_denied = bool(decision.would_deny())
        outcome, reason = ("shadow_denied" if shadow_denied else "allowed"), "none"
    else:
        outcome, reason = labels(decision)
    _note(plan, scope, outcome, reason, started, client_tag, history)
    if quota_settings.OPENTELEMETRY:
        otel.record(
            plan, scope, outcome, reason, windows=len(decision.states), started=started, store_seconds=store_seconds
        )
    if decision.ban_started:
        log_ban(request, client_tag, plan, decision.now + decision.ban_wait_us / 1e6)
    if outcome == "denied":
        log_denial(request, summarize_decision(decision, plan=plan, scope=scope, reason=reason))
        if refusals is not None:
            refusals.note(client_tag, decision, plan, scope, reason)


def record_acl(
    request: Any,
    entry: ACLRule,
    *,
    client_tag: str,
    plan: str | None,
    scope: str,
    started: float,
    history: History | None = None,
    refusals: RefusalLog | None = None,
) -> None:
    """Count a decision the allow or deny list ``entry`` made (metrics and ``history``), and audit a denial
    (noted in ``refusals`` too)."""
    allowed, entry_id = not entry.is_deny, entry.id
    outcome, reason = ("allowed", "none") if allowed else ("denied", "acl")
    _note(plan, scope, outcome, reason, started, client_tag, history)
    if quota_settings.OPENTELEMETRY:
        otel.record(plan, scope, outcome, reason, windows=0, started=started, store_seconds=0.0)
    if not allowed:
        log_denial(
            request, {"client": client_tag, "plan": plan, "scope": scope, "reason": "acl", "acl_entry": entry_id}
        )
        if refusals is not None:
            refusals.note_acl(client_tag, plan, scope, entry_id, refusals.now())


def _note(  # noqa: PLR0917  (one ledger entry's fields)
    plan: str | None,
    scope: str,
    outcome: str,
    reason: str,
    started: float,
    client_tag: str,
    history: History | None,
) -> None:
    """One decision into this process's ledger: the metrics and the history count it later
    (quotas/observability/ledger.py), so this is one append, no lock, on the request's path."""
    seconds = time.perf_counter() - started
    # The minute, not the time: a busy client's entries then differ by their duration only, and the fold counts
    # each run of them once (a float floor: int() is left to the fold, once per run).
    if history is None:
        _append((plan, scope, outcome, reason, client_tag, 0.0, 0, seconds))
    else:
        _append((plan, scope, outcome, reason, client_tag, history.now() // 60, history.serial, seconds))
    if len(_entries) >= FOLD_AT:  # nothing folded for a long while (the poller is off or dead)
        LEDGER.fold()
