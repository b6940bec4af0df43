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
from typing import TYPE_CHECKING, Protocol, TypeAlias

from quotas.settings import quota_settings

if TYPE_CHECKING:
    from quotas.store.decision import Decision, Reading


class HeaderSink(Protocol):
    """Where headers are set: a response's ``headers`` (Django's ``ResponseHeaders``), or a dict."""

    def __setitem__(self, name: str, value: str, /) -> None: ...


def rate_limit_headers(decision: Decision) -> dict[str, str]:
    """The headers for ``decision`` (none when no window is shown): name -> value, as
    :func:`add_rate_limit_headers` sets them."""
    headers: dict[str, str] = {}
    add_rate_limit_headers(decision, headers)
    return headers


def add_rate_limit_headers(decision: Decision, headers: HeaderSink) -> None:  # noqa: C901, PLR0912
    """Set the headers for ``decision`` in ``headers`` (a response's, or a dict), in their order; none when no
    window is shown: the rules of the module docstring, here alone, in one pass. Set in the response's own
    headers rather than in a dict the caller then copies: 2,200 to 2,900 instructions less a busy request
    (bench-count, docs/benchmark-history.md).

    The texts that depend only on the windows and the weight (the policy, each item's start and weight
    parameter) are worked out once for the decisions that share them (:attr:`Decision.memo`: those of one
    route, those of one allowance, which by its contract have the same windows and weight); each decision puts
    in its numbers (:meth:`Decision.readings`, which a decision served from an allowance gives without making
    its states).
    """
    if decision.allowed is False and refused_by_budget_alone(decision):
        # Its headers would describe rate windows that admitted it, with room left: a client would retry at
        # once. A budget counts money and has no item; Retry-After (its reset) and the body describe it.
        return
    readings = decision.readings()
    memo = decision.memo
    texts: _Texts | None = memo.get("headers") if memo is not None else None
    if texts is None:
        texts = _texts(readings, decision.weight)
        if memo is not None:
            memo["headers"] = texts
    policy, shown = texts
    if not shown:
        return
    items: list[str] = []
    denied: Reading | None = None  # the rate window that refused with the longest wait (the first of them)
    denied_wait = 0.0
    top: Reading | None = None  # else the least share of its quota remaining, then the longest reset
    top_share = top_reset = 0.0
    for index, start, weight_param, concurrency in shown:
        reading = readings[index]
        _window, ok, remaining, reset_us, retry_us, quota = reading
        if not ok:
            wait = math.inf if retry_us is None else retry_us
            if denied is None or wait > denied_wait:
                denied, denied_wait = reading, wait
        if remaining is None:  # a locally remembered refusal: nothing read to show
            continue
        left = remaining if remaining > 0 else 0
        if not concurrency:
            items.append(f"{start}{left};t={math.ceil(reset_us / 1e6)}{weight_param}")
        elif not ok and retry_us is not None:
            # Leases come back when requests end, at no known time: ``t`` only on a refusal, where it is the
            # Retry-After hint (the draft: Retry-After not before ``t``).
            items.append(f"{start}{left};t={math.ceil(retry_us / 1e6)}{weight_param}")
        else:
            items.append(f"{start}{left}{weight_param}")
        share = remaining / (quota if quota > 1 else 1)
        if top is None or share < top_share or (share == top_share and reset_us > top_reset):
            top, top_share, top_reset = reading, share, reset_us
    headers["RateLimit-Policy"] = policy
    if items:
        headers["RateLimit"] = ", ".join(items)
    legacy = denied if denied is not None else top
    if legacy is not None and quota_settings.LEGACY_HEADERS:
        # X-RateLimit-Limit, -Remaining and -Reset (epoch seconds) of that one window.
        _window, _ok, remaining, reset_us, _retry_us, quota = legacy
        headers["X-RateLimit-Limit"] = str(quota)
        headers["X-RateLimit-Remaining"] = str(remaining if remaining is not None and remaining > 0 else 0)
        headers["X-RateLimit-Reset"] = str(math.ceil(decision.now + reset_us / 1e6))


#: The texts of the headers of the decisions with the same windows and weight (see _texts): the RateLimit-Policy
#: value, and for each window shown its index, the start of its RateLimit item, its weight parameter (or "") and
#: whether it is a concurrency limit.
_Texts: TypeAlias = "tuple[str, tuple[tuple[int, str, str, bool], ...]]"


def _texts(readings: list[Reading], weight: int | None) -> _Texts:
    """What the headers of every decision with these windows (``readings``') and ``weight`` share (see
    :func:`rate_limit_headers`): the windows shown (advertised: not a shadow window, not a budget), in order."""
    policy: list[str] = []
    shown: list[tuple[int, str, str, bool]] = []
    for index, reading in enumerate(readings):
        window = reading[0]
        if not window.advertised:
            continue
        # Whether the window counts weight units rather than requests for this request (Decision.weighted).
        units = window.weight if weight is None else weight
        weighted = not window.counts_requests and (units != 1 or window.algorithm == "period_quota")
        policy.append(window.policy_item_units if weighted else window.policy_item)
        weight_param = f";quotas-weight={units}" if weighted else ""
        shown.append((index, window.state_prefix, weight_param, window.algorithm == "concurrency"))
    return ", ".join(policy), tuple(shown)


def refused_by_budget_alone(decision: Decision) -> bool:
    """Whether ``decision`` was refused by money budgets and by no window that headers describe (nor a ban)."""
    if decision.banned or decision.ban_started:
        return False
    denying = decision.denying_states()
    return bool(denying) and not any(s.window.advertised for s in denying)
