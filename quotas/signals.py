"""Signals sent by the quota engine."""

from django.dispatch import Signal

#: Sent once per budget, period and threshold when a client's spending
#: reaches 80 % or 100 % of a budget (100 % also when a request is refused by
#: it). Keyword arguments: client_tag (str, e.g. "s.12"), subscription_id
#: (int | None), budget (str, the budget's name), threshold (80 or 100),
#: period_start (aware datetime), spent_micros (int), amount_micros (int).
budget_threshold_crossed = Signal()

#: Sent when escalation bans a client (refused too often). Keyword arguments:
#: client_tag (str), subscription_id (int | None), plan_id (int | None),
#: until (aware datetime).
client_banned = Signal()

#: Sent when what this process remembers from Redis may be stale: the rules
#: version moved (a revoked key, a lifted ban or failed-authentication block),
#: the adaptive multipliers changed, or the runtime was rebuilt. Receivers drop
#: their in-process memory so that the next request asks Redis again.
#: No keyword arguments.
remembered_state_stale = Signal()
