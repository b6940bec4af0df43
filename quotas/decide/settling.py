"""After the view: settling an admitted decision, and sending the budget alerts it holds."""

from __future__ import annotations

from http import HTTPStatus

from quotas.contract.protocol import UsageCounter
from quotas.decide.shapes import Verdict
from quotas.observability.events import fire_budget_alerts

#: 500 as a plain int: on Python 3.11 reading ``HTTPStatus.INTERNAL_SERVER_ERROR`` goes through the enum's
#: descriptor each time.
_SERVER_ERROR = int(HTTPStatus.INTERNAL_SERVER_ERROR)


def settle(verdict: Verdict, status: int, actual_cost_micros: int | None = None) -> None:
    """After the view answered ``status``: refund a server error where a limit asks for it, else charge the
    actual cost the view reported (once), send the budget alerts of the spend then settled, and end the
    request's concurrency leases."""
    decision = verdict.decision
    engine = verdict.engine
    if decision is None or not decision.allowed or verdict.client is None or engine is None:
        return
    failed = status >= _SERVER_ERROR
    actual = 0 if failed else actual_cost_micros  # a failed view releases its estimate
    nothing_charged = actual is None or actual == decision.cost_micros
    if not failed and nothing_charged and not decision.request_id and not decision.unreported:
        return  # nothing to refund, charge, report or release (most requests)
    store = engine.runtime().guard.settlement
    try:
        if failed:
            store.refund(decision)
        if actual is not None and actual != decision.cost_micros:
            # The budgets' states take the settled spend, and keep only the thresholds it still reaches.
            store.reconcile(decision, actual)
        send_alerts(verdict)
    finally:
        if decision.request_id:  # whatever failed above, the request's leases end with it
            store.release(decision)


def withdraw(verdict: Verdict) -> None:
    """Take back an admitted ``verdict`` whose request another decision refused (a later throttle class of the
    view): its windows get their units back, its estimate is released (a refused request is charged nothing),
    its leases end, and usage counts the request refused."""
    decision, engine = verdict.decision, verdict.engine
    if decision is None or not decision.allowed or engine is None:
        return
    settlement = engine.runtime().guard.settlement
    try:
        settlement.withdraw(decision, refused_as=UsageCounter.DENIED_RATE)
    finally:
        if decision.request_id:
            settlement.release(decision)


def send_alerts(verdict: Verdict) -> None:
    """Send the budget alerts ``verdict``'s decision holds and has not sent (each once).

    An admitted request's thresholds are sent when it is settled (:func:`settle`), with the spend it was
    finally charged: a refund or a lower actual cost takes back a threshold it no longer reaches. A refusal
    was charged nothing, so its alert (a budget that refused with 80 % or more spent reports 100 %) goes at
    once. A front door that never settles calls this itself (QuotaThrottle without QuotaHeadersMiddleware).
    """
    decision, client = verdict.decision, verdict.client
    if decision is None or client is None or not decision.unreported:
        return
    fire_budget_alerts(client.tag, client.subscription_id, decision.states, decision.now)
    for state in decision.states:
        state.alert = 0
