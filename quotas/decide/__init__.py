"""The decision service: one request's quota verdict, whichever front door it came through.

Every adapter (the DRF throttle, ``@quota_limited``, ``PathQuotaMiddleware``,
GraphQL, their async forms) only builds the :class:`Facts` of a request and
turns the :class:`Verdict` into its framework's answer. Everything else
happens in :mod:`quotas.decide.hot_path`, once, in this order:

1. the rules snapshot and the client (API key, user or address; an adapter
   that counts the request as someone else resolves it first, :func:`identified`);
2. the windows: the client's plan's limits matching the scope, path and
   method, else the adapter's fallback limits (DRF's rates), plus the limits
   the code gave;
3. allow and deny lists (in process, no Redis);
4. every window in one store call, or the failure mode when Redis is down;
5. audit and metrics, a refusal's budget alerts, ban reports;
6. the refusal (:mod:`quotas.decide.refusals`), or a shaping leaky bucket's delay.

After the view, :func:`settle` (:mod:`quotas.decide.settling`) refunds a server
error where a limit asks for it, charges the actual cost the view reported,
sends the budget alerts of the spend then settled, and ends concurrency leases.
"""

from quotas.decide.hot_path import Call, check, check_async, identified
from quotas.decide.refusals import refusal
from quotas.decide.settling import send_alerts, settle, withdraw
from quotas.decide.shapes import Facts, Verdict

__all__ = [
    "Call", "Facts", "Verdict", "check", "check_async", "identified", "refusal", "send_alerts", "settle", "withdraw",
]  # fmt: skip
