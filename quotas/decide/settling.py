"""After the view: settling an admitted decision, and sending the budget alerts it holds (the platform's, and the
thresholds its subscription set for itself)."""

from __future__ import annotations

from collections.abc import Sequence
from http import HTTPStatus

from quotas.contract.protocol import UsageCounter
from quotas.decide.shapes import Verdict
from quotas.observability.events import Span, fire_budget_alerts
from quotas.store.decision import Decision, WindowState

#: 500 as a plain int: on Python 3.11 reading ``HTTPStatus.INTERNAL_SERVER_ERROR`` goes through the enum's
#: descriptor each time.
_SERVER_ERROR = int(HTTPStatus.INTERNAL_SERVER_ERROR)


def settle(verdict: Verdict, status: int, actual_cost_micros: int | None = None) -> None:
    """After the view answered ``status``: refund a server error where a limit asks for it, else charge the
    actual cost the view reported (once), send the budget alerts of the spend then settled (and the thresholds
    of the subscription's own that it crossed), and end the request's concurrency leases."""
    decision = verdict.decision
    engine = verdict.engine
    if decision is None or not decision.allowed or verdict.client is None or engine is None:
        return
    failed = status >= _SERVER_ERROR
    actual = 0 if failed else actual_cost_micros  # a failed view releases its estimate
    nothing_charged = actual is None or actual == decision.cost_micros
    if not failed and nothing_charged and not decision.request_id and not decision.unreported and not _own(verdict):
        return  # nothing to refund, charge, report or release (most requests)
    store = engine.runtime().guard.settlement
    # Each budget's spend as decided, before the settlement changes it: what the request's spend crossed is
    # judged from it (a subscription without thresholds of its own reads none).
    decided = _decided(decision) if _own(verdict) else []
    estimate = decision.cost_micros
    try:
        if failed:
            store.refund(decision)
        delta = 0
        # The budgets' states take the settled spend, and keep only the thresholds it still reaches. None: Redis
        # did not take it, and the poller's charge of it reports what it reaches.
        if actual is not None and actual != estimate and store.reconcile(decision, actual) is not None:
            delta = actual - estimate
        send_alerts(verdict, _spans(decision, decided, estimate, delta) if decided else [])
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


def send_alerts(verdict: Verdict, spans: Sequence[Span] | None = None) -> None:
    """Send the budget alerts ``verdict``'s decision holds and has not sent (each once), and the subscription's
    own thresholds that ``spans`` crossed.

    An admitted request's thresholds are sent when it is settled (:func:`settle`), with the spend it was
    finally charged: a refund or a lower actual cost takes back a threshold it no longer reaches. A refusal
    was charged nothing, so its alert (a budget that refused with 80 % or more spent reports 100 %) goes at
    once. A front door that never settles calls this itself (QuotaThrottle without QuotaHeadersMiddleware):
    with ``spans`` None, an admitted request's spend is final as its decision charged it.
    """
    decision, client = verdict.decision, verdict.client
    if decision is None or client is None:
        return
    if spans is None:
        spans = _spans(decision, _decided(decision), decision.cost_micros, 0) if _own(verdict) else []
    if not spans and not decision.unreported:
        return
    fire_budget_alerts(client.tag, client.subscription_id, decision.states, decision.now, spans)
    for state in decision.states:
        state.alert = 0


def _own(verdict: Verdict) -> bool:
    """Whether the verdict's subscription set alert thresholds of its own (its money windows carry them)."""
    subscriber = verdict.client.subscriber if verdict.client is not None else None
    return subscriber is not None and subscriber.alerts != ()


def _decided(decision: Decision) -> list[tuple[WindowState, int]]:
    """Each admitted money window with a subscription's own thresholds, and its spend as the decision left it.
    None from the local fallback: its spend reaches the store, and is reported, when the poller charges it."""
    if not decision.allowed or decision.local:
        return []
    return [(state, state.used) for state in decision.states if state.ok and state.window.alerts]


def _spans(decision: Decision, decided: list[tuple[WindowState, int]], estimate: int, delta: int) -> list[Span]:
    """What the request's committed spend moved each window of ``decided`` through: from before its decision
    charged ``estimate`` to the spend as settled (an actual cost ``delta`` above or below the estimate); for a
    request of an allowance only the part above the estimate, the rest being committed at the allowance's end
    (which reports it). A threshold crossed is one the settled spend still reaches (quotas.observability.events)."""
    spans = []
    allowance = decision.allowance or decision.granted > 1
    for state, used in decided:
        after = state.used  # the settled spend (a reconciliation's reply), else the decision's
        before = after - delta if delta > 0 else after
        if not allowance:
            before = min(before, used - estimate)
        if after > before:
            spans.append((state.window, before, after, decision.now + state.reset_us / 1e6))
    return spans
