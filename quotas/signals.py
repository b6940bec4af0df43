"""Signals sent by the quota engine."""

from django.dispatch import Signal

#: Sent once per limit, period and threshold when a client's spending
#: reaches 80 % or 100 % of a budget, a cap or a period quota (100 % also when
#: a request is refused by it). Keyword arguments: client_tag (str, e.g.
#: "s.12"), subscription_id (int | None), budget (str, the limit's name),
#: threshold (80 or 100), period_start (aware datetime), spent_micros (int),
#: amount_micros (int); limit (str, the limit's id: "b3" a budget, "c-day" a
#: cap of its own, "kc7" the cap of key 7 and its rolls), unit ("money", or a
#: period quota's "requests" or "units": then spent_micros and amount_micros
#: are plain counts), currency (str, money only).
budget_threshold_crossed = Signal()

#: Sent when the committed spend of a money limit (a budget, a customer's cap,
#: a key's own cap) reaches one of the alert thresholds its subscription set
#: for itself, by the settlement (or the allowance's end, or the owed charge)
#: whose spend crossed it: in the order the spend reached them, with
#: ``budget_threshold_crossed`` of the same settlement. Receivers record it
#: once per limit, period and threshold (quotas sends it again if a refund took
#: the spend back under it and a later request crossed it once more). Keyword
#: arguments: client_tag, subscription_id, budget (the limit's name, or the
#: budget a cap lowers), limit (the limit's id, as for
#: ``budget_threshold_crossed``), period ("day", ...), threshold (1 to 100),
#: period_start, period_end (aware datetimes: the period as the store counts it),
#: spent_micros, amount_micros (the amount the threshold is a percent of),
#: currency.
spend_threshold_reached = Signal()

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
