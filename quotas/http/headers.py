"""Rate-limit response headers, all built here.

- ``RateLimit-Policy`` and ``RateLimit``: draft-ietf-httpapi-ratelimit-headers
  (-10), structured-field lists with one item per enforced window:
  ``RateLimit-Policy: "search";q=10;w=60`` and ``RateLimit: "search";r=3;t=42``,
  where ``t`` is the seconds until that window's full quota is back.

  * ``q`` is always the window's full quota: the policy stays the same over a
    sequence of responses (the draft's SHOULD), also while an adaptive
    multiplier reduces it; the reduction shows in ``r`` (and in the 503 body).
  * ``w`` only for a real window of fixed length (the rolling and aligned
    rate algorithms). A concurrency limit has no window (its length is a
    lease's lifetime) and a calendar period's length varies (a month is 28 to
    31 days; a day in a time zone with summer time 23 to 25 hours), so
    neither gets one; a period names itself in ``quotas-period`` instead.
  * ``qu`` (quota unit) for units other than requests: ``"concurrent-requests"``
    for a concurrency limit. A window counting weight units (a period quota,
    or any request taking other than one unit) says ``qu="requests"``: the
    closest registered unit (the draft leaves how many units a request
    consumes to the implementation) and, unlike an unregistered value, one
    every client may accept. The units this request took are in the
    vendor-prefixed ``quotas-weight`` parameter of its ``RateLimit`` item.

  The texts that never change for a window (its policy item, the start of its
  ``RateLimit`` item) are compiled with it, once per rules snapshot
  (:class:`quotas.rules.limits.Window`).

- ``X-RateLimit-Limit/Remaining/Reset`` (Reset as epoch seconds) for the most
  restrictive window, for clients written against GitHub-style headers.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from quotas.settings import quota_settings

if TYPE_CHECKING:
    from quotas.rules.limits import Window
    from quotas.store.decision import Decision, WindowState


def rate_limit_headers(decision: Decision) -> dict[str, str]:
    """The headers for ``decision`` (empty when no window is enforced): name -> value.

    The X-RateLimit-* window is the one :meth:`Decision.most_restrictive` picks.
    """
    return {name: value for name, value in header_entries(decision).values()}


def header_entries(decision: Decision) -> dict[str, tuple[str, str]]:  # noqa: C901, PLR0912, PLR0915  # one pass, measured
    """:func:`rate_limit_headers` as Django's ``ResponseHeaders`` keeps them: lower-case name -> (name, value).

    One pass over the states builds every header, the items' rules written out here rather than asked of
    ``Decision`` window by window (``weighted``, ``units``, ``most_restrictive``): 14,000 instructions instead
    of 21,700 for one limit, 41,000 instead of 72,600 for five (cachegrind, headers alone);
    tests/quotas/test_hotpath_equivalence.py holds them to the rules written out plainly, on random decisions.
    """
    memo = decision.memo
    if memo is None or not decision.allowed:
        pass
    elif decision.allowance:  # served from an allowance: what its states would be made of, worked out once
        served = memo.get("served")
        if served is None:
            served = memo["served"] = _served_texts(decision)
        if served:
            entries = _served_entries(decision, served)
            if entries is not None:
                return entries
    else:  # admitted, its windows' texts worked out once: its numbers put in
        texts = memo.get("headers")
        if texts is None:
            texts = memo["headers"] = _texts(decision)
        if texts:
            entries = _admitted_entries(decision, texts)
            if entries is not None:
                return entries
    if decision.allowed is False and refused_by_budget_alone(decision):
        # Its headers would describe rate windows that admitted it, with room left: a client would retry at
        # once. A budget counts money and has no item; Retry-After (its reset) and the body describe it.
        return {}
    weight = decision.weight
    policy: list[str] = []
    current: list[str] = []
    enforced: list[WindowState] = []  # X-RateLimit-*'s candidates when no window refused
    denied: WindowState | None = None  # ... the rate window that refused with the longest wait, else None
    denied_wait = 0.0
    for state in decision.states:
        window = state.window
        if not window.advertised:  # a shadow window or a budget
            continue
        # Decision.weighted(): whether the window counts weight units rather than requests for this request.
        if window.counts_requests:
            weighted = False
        else:
            units = window.weight if weight is None else weight
            weighted = units != 1 or window.algorithm == "period_quota"
        policy.append(window.policy_item_units if weighted else window.policy_item)
        if not state.ok:  # Decision.most_restrictive(): the first of the longest waits (a request never fitting)
            wait = math.inf if state.retry_us is None else state.retry_us
            if denied is None or wait > denied_wait:
                denied, denied_wait = state, wait
        remaining = state.remaining
        if remaining is None:  # a locally remembered refusal: nothing read to show
            continue
        enforced.append(state)
        # The window's RateLimit item: what remains of it, and when more is back.
        if window.algorithm != "concurrency":
            item = f"{window.state_prefix}{remaining if remaining > 0 else 0};t={math.ceil(state.reset_us / 1e6)}"
        elif not state.ok and state.retry_us is not None:
            # Leases come back when requests end, at no known time: ``t`` only on a refusal,
            # where it is the Retry-After hint (the draft: Retry-After not before ``t``).
            item = f"{window.state_prefix}{remaining if remaining > 0 else 0};t={math.ceil(state.retry_us / 1e6)}"
        else:
            item = f"{window.state_prefix}{remaining if remaining > 0 else 0}"
        if weighted:
            item += f";quotas-weight={units}"
        current.append(item)
    if not policy:
        return {}
    entries = {"ratelimit-policy": ("RateLimit-Policy", ", ".join(policy))}
    if current:
        entries["ratelimit"] = ("RateLimit", ", ".join(current))
    if not quota_settings.LEGACY_HEADERS:
        return entries
    top = denied
    if top is None and enforced:
        # Decision.most_restrictive(): the least remaining of its quota, then the longest reset; the first on a tie.
        top = enforced[0]
        if len(enforced) > 1:
            best = ((top.remaining or 0) / (top.quota if top.quota > 1 else 1), -top.reset_us)
            for state in enforced:
                key = ((state.remaining or 0) / (state.quota if state.quota > 1 else 1), -state.reset_us)
                if key < best:
                    top, best = state, key
    if top is not None:
        remaining = top.remaining or 0
        entries["x-ratelimit-limit"] = ("X-RateLimit-Limit", str(top.quota))
        entries["x-ratelimit-remaining"] = ("X-RateLimit-Remaining", str(remaining if remaining > 0 else 0))
        entries["x-ratelimit-reset"] = ("X-RateLimit-Reset", str(math.ceil(decision.now + top.reset_us / 1e6)))
    return entries


#: The texts of the headers of admitted decisions with the same windows and weight (see _texts): the RateLimit-Policy
#: entry, the RateLimit value with a ``%d`` for each number, how many windows there are, and each window shown with
#: its index.
_Texts: TypeAlias = "tuple[tuple[str, str], str, int, tuple[tuple[int, Window], ...]]"

_ceil = math.ceil


def _texts(decision: Decision) -> _Texts | Literal[False]:
    """The header texts every admitted decision with ``decision``'s windows and weight shares, or False when they
    take the general path (no window shown, or a concurrency limit's, whose item depends on the decision).

    Two such decisions' headers differ only in their numbers: their texts are put together once (kept in
    :attr:`Decision.memo`), as :func:`header_entries` would, and each decision fills in its numbers with one
    ``%``: about 27,800 instructions instead of 40,600 with five windows, 14,800 instead of 15,800 with one
    (cachegrind, headers alone, served from an allowance). tests/quotas/test_allowances.py and
    tests/quotas/test_hotpath_equivalence.py hold them to the general path's."""
    weight = decision.weight
    policy: list[str] = []
    items: list[str] = []
    shown: list[tuple[int, Window]] = []
    for index, state in enumerate(decision.states):
        window = state.window
        if not window.advertised:
            continue
        if window.algorithm == "concurrency":
            return False
        if window.counts_requests:
            weighted = False
        else:
            units = window.weight if weight is None else weight
            weighted = units != 1 or window.algorithm == "period_quota"
        policy.append(window.policy_item_units if weighted else window.policy_item)
        item = window.state_prefix.replace("%", "%%") + "%d;t=%d"
        items.append(item + f";quotas-weight={units}" if weighted else item)
        shown.append((index, window))
    if not shown:
        return False
    return ("RateLimit-Policy", ", ".join(policy)), ", ".join(items), len(decision.states), tuple(shown)


def _admitted_entries(decision: Decision, texts: _Texts) -> dict[str, tuple[str, str]] | None:
    """:func:`header_entries` of an admitted decision, from its windows' ``texts``: X-RateLimit-* shows the first
    window with the least of its quota remaining, then the longest reset. None (the general path) for a window
    shown that did not admit it, or was not read, or states other than the texts were made for."""
    policy, template, count, shown = texts
    states = decision.states
    if len(states) != count:
        return None
    numbers: list[int] = []
    top: Any = None
    top_share = top_reset = 0.0
    for index, window in shown:
        state = states[index]
        remaining = state.remaining
        if state.window is not window or not state.ok or remaining is None:
            return None
        reset_us, quota = state.reset_us, state.quota
        numbers += (remaining if remaining > 0 else 0, _ceil(reset_us / 1e6))
        share = remaining / (quota if quota > 1 else 1)
        # (share, -reset_us) < the best's, as header_entries compares them, without making the tuples.
        if top is None or share < top_share or (share == top_share and reset_us > top_reset):
            top, top_share, top_reset = state, share, reset_us
    entries = {"ratelimit-policy": policy, "ratelimit": ("RateLimit", template % tuple(numbers))}
    if quota_settings.LEGACY_HEADERS:
        remaining = top.remaining
        entries["x-ratelimit-limit"] = ("X-RateLimit-Limit", str(top.quota))
        entries["x-ratelimit-remaining"] = ("X-RateLimit-Remaining", str(remaining if remaining > 0 else 0))
        entries["x-ratelimit-reset"] = ("X-RateLimit-Reset", str(_ceil(decision.now + top_reset / 1e6)))
    return entries


#: What the headers of the decisions one allowance serves share (see _served_texts): the RateLimit-Policy entry,
#: the RateLimit value with a ``%d`` for each number, and for each window shown, from the allowance's basis: its
#: remaining at the grant, the units a request takes, its reset at the grant (us), the quota to divide by (at
#: least 1) and the quota as X-RateLimit-Limit shows it.
_ServedTexts: TypeAlias = "tuple[tuple[str, str], str, tuple[tuple[int, int, int, int, str], ...]]"


def _served_texts(decision: Decision) -> _ServedTexts | Literal[False]:
    """The texts and numbers every decision served from ``decision``'s allowance shares (kept in the allowance's
    :attr:`Decision.memo`), or False when they take the general path (see :func:`_texts`; a window shown that
    was not read). Kept rather than read from the basis by index for every request: 118 bytecodes less a served
    request with five windows, about 1,800 instructions (make bench-count, busy client, 5 limits)."""
    texts = _texts(decision)
    basis = getattr(decision, "basis", None)  # once an allowance: a ServedDecision's (see _served_entries)
    if not texts or basis is None or len(basis) != texts[2]:
        return False
    rows = []
    for index, window in texts[3]:
        held, remaining, reset_us, _used, _alert, quota, units = basis[index]
        if held is not window or remaining is None:
            return False
        rows.append((remaining, units, reset_us, quota if quota > 1 else 1, str(quota)))
    return texts[0], texts[1], tuple(rows)


def _served_entries(decision: Decision, served: _ServedTexts) -> dict[str, tuple[str, str]] | None:
    """:func:`_admitted_entries` of a decision served from an allowance, its numbers worked out from what its
    states are made of (:class:`quotas.store.allowances.ServedDecision`: the grant's, ``ahead`` requests' units
    counted as remaining, ``elapsed_us`` gone by) as :func:`quotas.store.allowances.served_states` works them
    out, so that the states are not made for the headers alone (see ServedDecision for the figure). Every served
    state admitted it. tests/quotas/test_allowances.py holds them to the general path's."""
    policy, template, rows = served
    try:
        ahead, elapsed_us = decision.ahead, decision.elapsed_us  # type: ignore[attr-defined]
    except AttributeError:  # a copy dataclasses.replace() made: its states are set, as any decision's
        return None  # the general path
    numbers: list[int] = []
    top_quota, top_remaining, top_share, top_reset = "", 0, math.inf, 0
    for remaining, units, reset_us, divisor, quota in rows:
        remaining += ahead * units
        reset_us -= elapsed_us
        if reset_us < 0:  # noqa: PLR1730  (max() is a call: see quotas.store.allowances.served_states)
            reset_us = 0
        numbers += (remaining if remaining > 0 else 0, _ceil(reset_us / 1e6))
        share = remaining / divisor
        # The first with the least share of its quota remaining, then the longest reset (see _admitted_entries).
        if share < top_share or (share == top_share and reset_us > top_reset):
            top_quota, top_remaining, top_share, top_reset = quota, remaining, share, reset_us
    entries = {"ratelimit-policy": policy, "ratelimit": ("RateLimit", template % tuple(numbers))}
    if quota_settings.LEGACY_HEADERS:
        entries["x-ratelimit-limit"] = ("X-RateLimit-Limit", top_quota)
        entries["x-ratelimit-remaining"] = ("X-RateLimit-Remaining", str(top_remaining if top_remaining > 0 else 0))
        entries["x-ratelimit-reset"] = ("X-RateLimit-Reset", str(_ceil(decision.now + top_reset / 1e6)))
    return entries


def refused_by_budget_alone(decision: Decision) -> bool:
    """Whether ``decision`` was refused by money budgets and by no window that headers describe (nor a ban)."""
    if decision.banned or decision.ban_started:
        return False
    denying = decision.denying_states()
    return bool(denying) and not any(s.window.advertised for s in denying)
