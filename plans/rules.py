"""The database rules backend: plans and limits as a quotas RuleSet."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from decimal import Decimal
from typing import Any

from django.db.models import Q
from django.utils import timezone

from quotas.formats.acl import AccessList, ACLRule, covers_everyone, parse_network
from quotas.formats.money import to_micros
from quotas.formats.rates import Rate, parse_rates
from quotas.rules.limits import SET_BY_CUSTOMER, SET_BY_KEY, UNLIMITED, LimitRule, code_rate_algorithm
from quotas.rules.snapshot import PlanRules, RuleSet, Subscriber, ban_policy_spec

from .models import (
    ACLEntry,
    ACLFeed,
    AlertThresholds,
    APIKey,
    CostBudget,
    EndpointLimit,
    LimitOverride,
    PeriodQuota,
    Plan,
    RulesChange,
    SpendCap,
    Subscription,
    group_plan_id,
    parse_durations,
)
from .models.caps import FULL, budget_of, cap_name, plan_currency

logger = logging.getLogger(__name__)

#: The window length RateLimit headers advertise for a calendar period.
NOMINAL_SECONDS = {"day": 86400, "week": 7 * 86400, "month": 30 * 86400, "billing_month": 30 * 86400}


def limit_rule(limit: EndpointLimit) -> LimitRule:
    """The engine's view of one EndpointLimit."""
    return LimitRule(
        id=str(limit.pk),
        name=limit.name,
        rates=parse_rates(limit.rates),
        algorithm=limit.algorithm,
        scope=limit.scope,
        path_prefix=limit.path_prefix,
        methods=limit.method_set,
        burst=limit.burst,
        weight=limit.weight,
        max_delay=limit.max_delay,
        shadow=limit.shadow,
        refund_on_error=limit.refund_on_error,
        price_micros=to_micros(limit.price),
        countries=limit.country_set,
    )


def budget_rule(budget: CostBudget, cap: Decimal | None = None) -> LimitRule:
    """The engine's view of a money budget: a period window counting micro-units.

    ``cap`` (a customer's own :class:`~plans.models.SpendCap` of the period) lowers its amount; the window keeps
    the budget's id, hence its counter, so what the period has spent before the cap was set counts against it.
    """
    amount, name, set_by, lowered = budget.amount, budget.name, "", None
    if cap is not None and cap < amount:
        amount, name, set_by = cap, cap_name(budget.period), SET_BY_CUSTOMER
        lowered = (budget.name, to_micros(budget.amount))
    return LimitRule(
        id=f"b{budget.pk}",
        name=name,
        rates=(Rate(to_micros(amount), NOMINAL_SECONDS[budget.period]),),
        algorithm="budget",
        period=budget.period,
        currency=budget.currency,
        set_by=set_by,
        lowered=lowered,
    )


def period_quota_rule(quota: PeriodQuota) -> LimitRule:
    """The engine's view of a period quota (requests or weight units per period)."""
    return LimitRule(
        id=f"q{quota.pk}",
        name=quota.name,
        rates=(Rate(quota.units, NOMINAL_SECONDS[quota.period]),),
        algorithm="period_requests" if quota.unit == PeriodQuota.Unit.REQUESTS else "period_quota",
        scope=quota.scope,
        period=quota.period,
    )


def acl_rule(entry: ACLEntry) -> ACLRule:
    """The engine's view of one access-list entry; raises ValueError for a target it cannot match."""
    kind = entry.kind
    if kind == ACLEntry.Kind.KEY:
        value: Any = entry.api_key_id
    elif kind == ACLEntry.Kind.USER:
        value = entry.user_id
    elif kind == ACLEntry.Kind.SUBSCRIPTION:
        value = entry.subscription_id
    elif kind == ACLEntry.Kind.IP:
        value = parse_network(entry.cidr)
    else:
        raise ValueError("it matches no target or several")
    return ACLRule(
        id=entry.pk,
        action=entry.action,
        kind=kind,
        value=value,
        scope=entry.scope,
        expires_at=entry.expires_at.timestamp() if entry.expires_at else None,
        reason=entry.reason,
    )


def feed_rules(feed: ACLFeed) -> Iterator[ACLRule]:
    """The engine's view of a feed's last good list: one IP entry per network, named ``feed:<name>``.

    A stored network that does not parse, or an allow of half the addresses or more (both refused by the refresh
    and the admin's validation, so written around them), is logged and left out; an allow list whose networks
    together cover that much (quotas.formats.acl.covers_everyone) is left out whole.
    """
    entry_id, reason = f"feed:{feed.name}", f"listed by the {feed.name} feed"
    allow = feed.action == ACLEntry.Action.ALLOW
    networks = []
    for text in feed.networks():
        try:
            network = parse_network(text)
        except ValueError as exc:
            logger.error("quotas: ACL feed %s: network %r ignored: %s", feed.name, text, exc)
            continue
        if allow and covers_everyone([network]):
            logger.error("quotas: ACL feed %s: allowing %s would lift every limit; ignored", feed.name, network)
            continue
        networks.append(network)
    if allow and (covered := covers_everyone(networks)):
        logger.error("quotas: ACL feed %s: allowing its list would lift every limit (%s); ignored", feed.name, covered)
        return
    for network in networks:
        yield ACLRule(id=entry_id, action=feed.action, kind="ip", value=network, reason=reason)


def access_list() -> AccessList:
    """Every access-list entry that has not expired yet and every enabled feed's networks, compiled into one
    :class:`AccessList`: a feed's networks are matched exactly as the admin's entries are.

    An entry that cannot be compiled (written around model validation) is
    logged and left out rather than breaking every request's rules.
    """
    rules = []
    active = ACLEntry.objects.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now()))
    for entry in active.order_by("pk"):
        try:
            rules.append(acl_rule(entry))
        except ValueError as exc:
            logger.error("quotas: access-list entry %s ignored: %s", entry.pk, exc)
    for feed in ACLFeed.objects.filter(enabled=True).exclude(entries="").only("name", "action", "entries"):
        rules.extend(feed_rules(feed))
    return AccessList(rules)


class PlansRulesBackend:
    """Loads every plan with its limits; resolves API keys and users (subscription, group plan) on demand."""

    def load(self) -> RuleSet:
        plans = []
        default_id = None
        for plan in Plan.objects.prefetch_related("limits", "budgets", "period_quotas"):
            limits = [limit_rule(limit) for limit in plan.limits.all()]
            limits += [period_quota_rule(q) for q in plan.period_quotas.all()]
            limits += [budget_rule(b) for b in plan.budgets.all()]
            plans.append(
                PlanRules(
                    id=plan.pk,
                    slug=plan.slug,
                    name=plan.name,
                    price=plan.monthly_price,
                    priority=plan.priority,
                    limits=tuple(limits),
                    ban_policy=ban_policy_spec(
                        plan.ban_threshold, plan.ban_window, parse_durations(plan.ban_durations)
                    ),
                    local_allowances=plan.local_allowances,
                )
            )
            if plan.is_default:
                default_id = plan.pk
        return RuleSet(plans, default_id, acl=access_list())

    def subscriber_for_key(self, key_hash: str) -> Subscriber | None:
        key = APIKey.objects.select_related("subscription").filter(key_hash=key_hash).first()
        if key is None:
            return None
        sub = key.subscription
        return subscriber_of(
            sub,
            revoked=key.revoked_at is not None or not sub.is_active,
            key_id=key.pk,
            key_expires_at=key.expires_at.timestamp() if key.expires_at else None,
            key_limits=key_rules(key),
        )

    def subscriber_for_user(self, user_id: Any) -> Subscriber | None:
        """The user's active subscription, else the plan their groups give them (a :class:`Subscriber` without
        an id: see :class:`~plans.models.GroupPlan`), else None (the default plan)."""
        sub = Subscription.objects.filter(user_id=user_id, is_active=True).first()
        if sub is not None:
            return subscriber_of(sub)
        plan_id = group_plan_id(user_id)
        return Subscriber(id=None, plan_id=plan_id) if plan_id is not None else None

    def subscriber_for_subscription(self, subscription_id: int) -> Subscriber | None:
        """The subscriber of subscription ``subscription_id`` (revoked when it is inactive), for operators'
        commands (``quota_status s.12``); None when there is no such subscription."""
        sub = Subscription.objects.filter(pk=subscription_id).first()
        return subscriber_of(sub, revoked=not sub.is_active) if sub is not None else None

    def known_key_hashes(self) -> Iterable[str]:
        return APIKey.objects.usable().values_list("key_hash", flat=True).iterator(chunk_size=10_000)

    def change_mark(self) -> int:
        """A number every committed rules change moves (:class:`~plans.models.RulesChange`), one small query."""
        return RulesChange.count()

    def mark_change(self) -> None:
        """Move :meth:`change_mark` on: a rules change was committed."""
        RulesChange.bump()


def _budgets(sub: Subscription) -> tuple[LimitRule, ...]:
    # The subscription's own budgets, each lowered by its cap; a cap of a period only its plan budgets lowers
    # that budget (as the subscription's own window, which replaces the plan's of that period).
    caps = {c.period: c.amount for c in SpendCap.objects.filter(subscription=sub)}
    own = list(CostBudget.objects.filter(subscription=sub))
    own_periods = {b.period for b in own}
    plans = [b for b in CostBudget.objects.filter(plan_id=sub.plan_id, period__in=caps) if b.period not in own_periods]
    rules = [budget_rule(b, caps.get(b.period)) for b in own + plans]
    # A cap whose period has no budget (its plan changed to one without) holds on its own: a budget of its amount.
    budgeted = own_periods | {b.period for b in plans}
    currency = plan_currency(sub.plan_id) if set(caps) - budgeted else ""
    rules += [cap_rule(period, amount, currency) for period, amount in caps.items() if period not in budgeted]
    return tuple(sorted(rules, key=lambda rule: rule.period))


def cap_rule(period: str, amount: Decimal, currency: str) -> LimitRule:
    """A customer's cap of a period without a budget: a budget window of its own, counted by its own counter."""
    return LimitRule(
        id=f"c-{period}",
        name=cap_name(period),
        rates=(Rate(to_micros(amount), NOMINAL_SECONDS[period]),),
        algorithm="budget",
        period=period,
        currency=currency,
        set_by=SET_BY_CUSTOMER,
    )


def key_rules(key: APIKey) -> tuple[LimitRule, ...]:
    """An API key's own limits, as the engine counts them besides its plan's: its rates on every request it
    makes, and its spending cap as a budget window of its own (its own counter: the key's spending, not the
    subscription's)."""
    rules = []
    counters = key.counters_id  # a rolled key's successor spends its predecessor's counters
    if key.own_rates:
        rules.append(LimitRule(id=f"k{counters}", name="key-rate", rates=parse_rates(key.own_rates),
                               algorithm=code_rate_algorithm(), set_by=SET_BY_KEY))  # fmt: skip
    if key.cap_period and key.cap_amount is not None:
        # Its own counter, whether or not the subscription has a budget of the period (a plan change may take it).
        period = key.cap_period
        budget = budget_of(key.subscription, period)
        currency = budget.currency if budget is not None else plan_currency(key.subscription.plan_id)
        rules.append(LimitRule(id=f"kc{counters}", name=f"key-{period}-cap", algorithm="budget", period=period,
                               rates=(Rate(to_micros(key.cap_amount), NOMINAL_SECONDS[period]),),
                               currency=currency, set_by=SET_BY_KEY))  # fmt: skip
    return tuple(rules)


def subscriber_of(
    sub: Subscription,
    revoked: bool = False,
    key_id: int | None = None,
    key_expires_at: float | None = None,
    key_limits: tuple[LimitRule, ...] = (),
) -> Subscriber:
    """The engine's view of a subscription: plan, overrides, own budgets (lowered by its caps), billing anchor,
    its own alert thresholds, and the key's own limits when it is reached by an API key."""
    overrides = tuple(
        sorted(
            (
                (str(o.limit_id), UNLIMITED if o.unlimited else parse_rates(o.rates))
                for o in LimitOverride.objects.filter(subscription=sub)
            ),
            key=lambda item: item[0],
        )
    )
    budgets = _budgets(sub)
    thresholds = AlertThresholds.objects.filter(subscription=sub).values_list("percents", flat=True).first()
    return Subscriber(
        id=sub.pk,
        plan_id=sub.plan_id,
        overrides=overrides,
        revoked=revoked,
        budgets=budgets,
        anchor_day=sub.started_on.day,
        key_id=key_id,
        key_expires_at=key_expires_at,
        key_limits=key_limits,
        # As validate_percents keeps them; a row written around it (a bad percent) costs its alerts, not the rules.
        alerts=tuple(sorted({p for p in thresholds or () if type(p) is int and 1 <= p <= FULL})),
    )
