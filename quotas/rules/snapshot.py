"""What limits apply to a request: the in-process rules snapshot.

A :class:`RuleSet` is an immutable snapshot of every plan and its limits,
built by a rules backend (``QUOTAS['RULES_BACKEND']``, for this project
``plans.rules.PlansRulesBackend``). Requests read it without touching the
database; :mod:`quotas.runtime.rules_cache` keeps it fresh in each process.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Protocol

from quotas.formats.acl import AccessList
from quotas.formats.rates import Rate
from quotas.rules.limits import UNLIMITED, LimitRule, Window


@dataclass(frozen=True, slots=True)
class PlanRules:
    """A plan as the engine sees it."""

    id: int
    slug: str
    name: str
    price: Decimal
    priority: int
    limits: tuple[LimitRule, ...]
    ban_policy: str = ""  # escalation, as decide.lua reads it (see ban_policy_spec); "" = off
    local_allowances: bool = True  # busy clients may be admitted from allowances (quotas/store/allowances.py)


@dataclass(frozen=True, slots=True)
class Subscriber:
    """A known client: a subscription reached by API key or user, or a user on a plan without one.

    ``id`` is the subscription's, or None for a user a rules backend puts on a plan without a subscription
    (the plans app's group plans): such a user is counted as themselves (``u.<user id>``), never under a
    subscription (``s.<id>``), so each user's usage stays their own (see
    :func:`quotas.identity.clients.user_client`).
    ``overrides`` maps a limit id to replacement rates, or to :data:`UNLIMITED`.
    ``revoked`` is set for a revoked API key (or an inactive subscription);
    ``key_expires_at`` (seconds since the epoch) is when the API key it was
    resolved from stops working, checked at each request so a cached
    subscriber lapses on its own.
    """

    id: int | None
    plan_id: int
    overrides: tuple[tuple[str, tuple[Rate, ...] | None], ...] = ()
    revoked: bool = False
    budgets: tuple[LimitRule, ...] = ()  # the subscription's own budgets, replacing the plan's per period
    anchor_day: int = 1  # billing months start on this day of the month
    key_id: int | None = None  # the API key it was resolved from (access lists match keys)
    key_expires_at: float | None = None
    #: That key's own limits (a lower rate, a spending cap its owners gave it), counted besides the plan's.
    key_limits: tuple[LimitRule, ...] = ()
    #: The subscription's own alert thresholds (whole percents, sorted): every money limit of its requests
    #: reports them as its spend is committed (quotas.observability.events.own_crossings).
    alerts: tuple[int, ...] = ()

    @property
    def rules_key(self) -> tuple:
        """What makes this subscriber's limits differ from its plan's."""
        return (self.overrides, self.budgets, self.anchor_day, self.key_limits, self.alerts)


#: The methods whose requests :attr:`RuleSet.routes` keeps answers for.
_USUAL_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class RuleSet:
    """An immutable snapshot of all plans; cheap to query per request."""

    def __init__(
        self,
        plans: Iterable[PlanRules],
        default_plan_id: int | None,
        version: str = "",
        acl: AccessList | None = None,
    ) -> None:
        self.plans: Mapping[int, PlanRules] = {p.id: p for p in plans}
        self.default_plan_id = default_plan_id
        self.version = version
        #: Who is allowed or denied outright (quotas.formats.acl), before any limit.
        self.acl = acl if acl is not None else AccessList()
        self._limits_cache: dict[tuple, tuple[LimitRule, ...]] = {}
        self._upgrade_cache: dict[tuple[int, str, int], PlanRules | None] = {}
        self._index_cache: dict[tuple, _PlanIndex] = {}
        #: :meth:`for_request`'s answers by (plan id, the subscriber's rules_key or None, scope, method), for plans
        #: whose limits name no path (the path then changes nothing): the hot path reads it without a call (two calls
        #: and a module less a decision, docs/benchmark-history.md). Only the usual methods: a made-up one adds no
        #: entry.
        self.routes: dict[tuple, RequestRules] = {}

    @property
    def empty(self) -> bool:
        """No plans: the throttle falls back to DRF's own rate settings."""
        return not self.plans

    def limits_for(self, plan_id: int | None, subscriber: Subscriber | None = None) -> tuple[LimitRule, ...]:
        """The limits of a plan as they apply to ``subscriber`` (its overrides, budgets, anchor)."""
        if plan_id is None or plan_id not in self.plans:
            return ()
        # The snapshot's compiled form, not a request shortcut: a subscriber's overrides and budgets
        # build LimitRules of their own (rates parsed, window specs packed) once per snapshot.
        cache_key = (plan_id, subscriber.rules_key if subscriber else None)
        cached = self._limits_cache.get(cache_key)
        if cached is None:
            cached = self._limits_cache[cache_key] = self._apply(self.plans[plan_id].limits, subscriber)
        return cached

    @staticmethod
    def _apply(limits: tuple[LimitRule, ...], subscriber: Subscriber | None) -> tuple[LimitRule, ...]:
        if subscriber is None:
            return limits
        by_id = dict(subscriber.overrides)
        own_periods = {b.period for b in subscriber.budgets}
        out = []
        for rule in limits:
            if rule.algorithm == "budget" and rule.period in own_periods:
                continue  # the subscription's own budget for that period replaces the plan's
            if rule.id in by_id:
                rates = by_id[rule.id]
                if rates is UNLIMITED and not rule.price_micros:
                    continue
                # Lifting a priced limit lifts its rates, not its price: the requests it matches are still
                # charged to the budgets (a rule without rates has no window, only its price).
                rule = rule.with_rates(() if rates is UNLIMITED else rates)
            out.append(rule)
        out.extend(subscriber.budgets)
        out.extend(subscriber.key_limits)
        if subscriber.alerts:  # its money limits carry its thresholds (copies: a plan's budget is every subscriber's)
            out = [r.with_alerts(subscriber.alerts) if r.algorithm == "budget" else r for r in out]
        if subscriber.anchor_day != 1:
            out = [r.anchored(subscriber.anchor_day) if r.period == "billing_month" else r for r in out]
        return tuple(out)

    def for_request(
        self, plan_id: int | None, subscriber: Subscriber | None, scope: str, path: str, method: str
    ) -> RequestRules:
        """What a request with that scope, path and method needs of the plan (as it applies to ``subscriber``):
        its matching windows and its list price, worked out once per snapshot and then looked up."""
        rules_key = subscriber.rules_key if subscriber else None
        cache_key = (plan_id, rules_key)
        index = self._index_cache.get(cache_key)
        if index is None:
            index = self._index_cache[cache_key] = _PlanIndex(self.limits_for(plan_id, subscriber))
        found = index.lookup(scope, path, method)
        if not index.prefixes and method in _USUAL_METHODS:
            self.routes[plan_id, rules_key, scope, method] = found
        return found

    def upgrade_for(self, plan_id: int | None, window: Window) -> PlanRules | None:
        """The cheapest higher plan whose matching limit is larger for ``window``.

        "Larger" means its rate with the same window length has a higher quota,
        or it has no such rate at all for that target.
        """
        if plan_id is None or plan_id not in self.plans:
            return None
        key = (plan_id, window.limit_id, window.window)
        if key in self._upgrade_cache:
            return self._upgrade_cache[key]
        current = self.plans[plan_id]
        rule = next((r for r in current.limits if r.id == window.limit_id), None)
        found = None
        if rule is not None:
            higher = sorted(
                (p for p in self.plans.values() if (p.price, p.priority) > (current.price, current.priority)),
                key=lambda p: (p.price, p.priority),
            )
            for plan in higher:
                windows = [
                    w
                    for other in plan.limits
                    if other.same_target(rule) and not other.shadow
                    for w in other.windows
                    if w.window == window.window
                ]
                if any(w.currency != window.currency for w in windows):
                    continue  # amounts in another currency are not larger or smaller: no offer from them
                if all(w.quota > window.quota for w in windows):
                    found = plan
                    break
        self._upgrade_cache[key] = found
        return found


@dataclass(frozen=True, slots=True)
class RequestRules:
    """What one kind of request needs of a plan: the windows that match it, and its list price.

    When a matching limit is kept to some countries, ``windows`` and ``price_micros`` are those of the limits
    for every country, and ``by_country`` holds every matching limit: :meth:`in_country` gives what a request
    from one country needs. Otherwise ``by_country`` is empty, so a plan without country limits costs a
    request one attribute check.
    """

    windows: tuple[Window, ...]
    price_micros: int
    by_country: tuple[LimitRule, ...] = ()
    leases: bool = False  # a window is a concurrency limit (its leases are named by the request)

    @classmethod
    def of(cls, rules: Iterable[LimitRule]) -> RequestRules:
        """The windows and price of the matching limits ``rules`` (those kept to countries set apart)."""
        rules = tuple(rules)
        anywhere = [r for r in rules if not r.countries]
        by_country = rules if len(anywhere) < len(rules) else ()
        return cls._of_windows(
            tuple(w for r in anywhere for w in r.windows), sum(r.price_micros for r in anywhere), by_country
        )

    def in_country(self, country: str | None) -> RequestRules:
        """What a request from ``country`` (None: not known) needs: the limits for every country, and those
        kept to countries that include it, in the plan's order."""
        rules = [r for r in self.by_country if r.applies_in(country)]
        return self._of_windows(tuple(w for r in rules for w in r.windows), sum(r.price_micros for r in rules))

    @classmethod
    def _of_windows(
        cls, windows: tuple[Window, ...], price: int, by_country: tuple[LimitRule, ...] = ()
    ) -> RequestRules:
        return cls(windows, price, by_country, any(w.algorithm == "concurrency" for w in windows))


class _PlanIndex:
    """A plan's limits, indexed by what decides whether a limit matches a request.

    A limit matches on the request's scope, its method and whether its path
    starts with the limit's prefix, so two requests that agree on the scope,
    on the method (or both use one no limit names) and on which of the plan's
    prefixes their paths start with get the same :class:`RequestRules`. The
    index is keyed on exactly that, so it stays as small as the plan: a path's
    ids or a made-up method never add an entry.
    """

    def __init__(self, limits: tuple[LimitRule, ...]) -> None:
        self.limits = limits
        self.prefixes = tuple(sorted({r.path_prefix for r in limits if r.path_prefix and not r.scope}))
        self.methods = frozenset(m for r in limits for m in r.methods)
        self.by_request: dict[tuple[str, str, tuple[str, ...]], RequestRules] = {}

    def lookup(self, scope: str, path: str, method: str) -> RequestRules:
        """What a request with that scope, path and method needs of the plan (built on its first request)."""
        prefixes = self.prefixes  # most plans have none: no generator then, on every request
        matched = tuple(p for p in prefixes if path.startswith(p)) if prefixes else ()
        key = (scope, method if method in self.methods else "", matched)
        found = self.by_request.get(key)
        if found is None:  # two threads may build the same entry: the same value, so either may stay
            found = RequestRules.of(r for r in self.limits if r.matches(scope, path, method))
            self.by_request[key] = found
        return found


class RulesBackend(Protocol):
    """Where rules come from. ``plans.rules.PlansRulesBackend`` is the database one.

    A backend may also have ``subscriber_for_subscription(subscription_id) -> Subscriber | None``: with it,
    the operators' commands (``quota_status``, ``quota_reset``) know the plan of a subscription named by id.
    And ``change_mark() -> int`` with ``mark_change() -> None``: a number in the backend's own storage that
    every committed rules change moves on. Each process reads it, about once a second off the request path,
    while the rules version in Redis is unreadable, so a change (a revoked key) still reaches every process
    within a couple of seconds (:mod:`quotas.runtime.change_mark`).
    """

    def load(self) -> RuleSet: ...

    def subscriber_for_key(self, key_hash: str) -> Subscriber | None: ...

    def subscriber_for_user(self, user_id: Any) -> Subscriber | None:
        """The plan user ``user_id`` is on: their subscription's, or a :class:`Subscriber` without an id (a plan
        the backend gives users without one), or None (the default plan)."""
        ...

    def known_key_hashes(self) -> Iterable[str]:
        """The hashes of every usable API key (read only while an address is blocked for failed sign-ins)."""
        ...


def ban_policy_spec(refusals: int, window: int, durations: tuple[int, ...]) -> str:
    """Escalation for decide.lua: ban after more than ``refusals`` refusals in ``window``
    seconds, for ``durations`` seconds (the n-th ban lasts the n-th duration, the last repeats)."""
    if refusals <= 0 or window <= 0 or not durations:
        return ""
    return f"{refusals} {window * 1_000_000} {','.join(str(d * 1_000_000) for d in durations)}"
