"""What limits apply to a request: the in-process rules snapshot.

A :class:`RuleSet` is an immutable snapshot of every plan and its limits,
built by a rules backend (``QUOTAS['RULES_BACKEND']``, for this project
``plans.rules.PlansRulesBackend``). Requests read it without touching the
database; :mod:`quotas.runtime.rules_cache` keeps it fresh in each process.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache
from typing import Any, Protocol

from django.conf import settings

from quotas.conf import quota_settings
from quotas.contract.keys import window_field
from quotas.contract.protocol import ALGORITHM_CODES, WindowSpec
from quotas.formats.acl import AccessList
from quotas.formats.periods import period_bounds
from quotas.formats.rates import Rate, parse_rates

#: Marks a subscription override that lifts a limit entirely.
UNLIMITED = None


@dataclass(frozen=True, slots=True)
class Window:
    """One rate of one limit, compiled into what the decision script needs."""

    limit_id: str
    policy: str  # the policy name clients see in RateLimit headers
    algorithm: str
    quota: int
    window: int  # seconds
    capacity: int
    weight: int
    max_delay: float  # seconds; > 0 only for a shaping leaky bucket
    shadow: bool
    refund_on_error: bool
    state_field: str = field(compare=False)  # the window's name in the client hash (or its log key)
    period: str = ""  # a calendar period (quotas.formats.periods.PERIODS) for period quotas and budgets
    anchor_day: int = 1  # first day of a billing month
    currency: str = ""  # budgets only: quota and state are micro-units of this currency
    spec: bytes = field(init=False, compare=False)  # this window as decide.lua reads it (rolling windows)
    policy_sf: str = field(init=False, compare=False)  # the policy name as a structured-field string
    # Header text that never changes for a window, made once here rather than on every response
    # (quotas.http.headers puts them together). make bench --quick --only latency,hot, 2026-11-25, before
    # and after (this and settings kept once read), alternately twice: one busy client's own cost
    # 37.2, 38.0 -> 31.9, 33.7 us (1 limit), 46.8, 48.2 -> 41.1, 42.9 us (5 limits).
    advertised: bool = field(init=False, compare=False, repr=False)  # shown in RateLimit headers
    counts_requests: bool = field(init=False, compare=False, repr=False)  # one unit a request, whatever its weight
    policy_item: str = field(init=False, compare=False, repr=False)  # its RateLimit-Policy item
    policy_item_units: str = field(init=False, compare=False, repr=False)  # ... for a request of other than 1 unit
    state_prefix: str = field(init=False, compare=False, repr=False)  # the start of its RateLimit item

    def __post_init__(self) -> None:
        spec = WindowSpec(
            ALGORITHM_CODES[self.algorithm], self.quota, self.window * 1_000_000, self.capacity, self.weight,
            round(self.max_delay * 1_000_000), self.shadow, self.state_field,
        ).pack()  # fmt: skip
        policy_sf = sf_string(self.policy)
        object.__setattr__(self, "spec", spec)
        object.__setattr__(self, "policy_sf", policy_sf)
        # Shadow windows never refuse and budgets count money, so neither is advertised.
        object.__setattr__(self, "advertised", not self.shadow and self.algorithm != "budget")
        object.__setattr__(self, "counts_requests", self.algorithm in ("period_requests", "concurrency"))
        one, units = _policy_items(self, policy_sf)
        object.__setattr__(self, "policy_item", one)
        object.__setattr__(self, "policy_item_units", units)
        object.__setattr__(self, "state_prefix", policy_sf + ";r=")

    @property
    def has_own_key(self) -> bool:
        """Whether the window keeps a key of its own (sliding log, concurrency leases)."""
        return self.algorithm in ("sliding_window_log", "concurrency")

    @property
    def code(self) -> int:
        """The algorithm's wire code (quotas.contract.protocol.Algorithm)."""
        return ALGORITHM_CODES[self.algorithm]

    @property
    def is_budget(self) -> bool:
        """Whether the window counts money (micro-units) rather than requests."""
        return self.algorithm == "budget"

    def spec_at(self, now: float) -> bytes:
        """The spec for a request at ``now``; periods carry their current boundaries."""
        if not self.period:
            return self.spec
        bounds = period_bounds(self.period, now, quota_settings.BUDGET_TIME_ZONE, self.anchor_day)
        return WindowSpec.for_period(
            self.code, self.quota, self.weight, self.shadow, self.state_field, start_us=bounds.start * 1_000_000,
            end_us=bounds.end * 1_000_000, next_end_us=bounds.next_end * 1_000_000,
        ).pack()  # fmt: skip


@dataclass(frozen=True, slots=True)
class LimitRule:
    """A limit: what it matches, how it counts, and its rates (one window each)."""

    id: str
    name: str
    rates: tuple[Rate, ...]
    algorithm: str = "token_bucket"
    scope: str = ""
    path_prefix: str = ""
    methods: frozenset[str] = frozenset()
    burst: int | None = None
    weight: int = 1
    max_delay: float = 0.0
    shadow: bool = False
    refund_on_error: bool = False
    period: str = ""  # period quotas and budgets: their calendar period
    anchor_day: int = 1
    currency: str = ""
    price_micros: int = 0  # what a matching request costs, in micro-units
    countries: frozenset[str] = frozenset()  # only requests from these countries (ISO codes); empty: from anywhere
    windows: tuple[Window, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        if "GET" in self.methods and "HEAD" not in self.methods:
            # Django and DRF answer HEAD with the GET handler: a GET limit that
            # skipped HEAD would let a client run the view for free.
            object.__setattr__(self, "methods", self.methods | {"HEAD"})
        if not self.windows:
            object.__setattr__(self, "windows", tuple(self._compile()))

    def _compile(self) -> Iterable[Window]:
        many = len(self.rates) > 1
        for rate in self.rates:
            policy = f"{self.name}-{_window_label(rate.window)}" if many else self.name
            yield Window(
                limit_id=self.id,
                policy=policy,
                algorithm=self.algorithm,
                quota=rate.limit,
                window=rate.window,
                capacity=max(rate.limit, self.burst or 0),
                weight=self.weight,
                max_delay=min(self.max_delay, float(quota_settings.MAX_DELAY_CAP))
                if self.algorithm == "leaky_bucket"
                else 0.0,
                shadow=self.shadow,
                refund_on_error=self.refund_on_error,
                state_field=window_field(self.id, self.algorithm, rate.window),
                period=self.period,
                anchor_day=self.anchor_day,
                currency=self.currency,
            )

    def matches(self, scope: str, path: str, method: str) -> bool:
        """Whether this limit applies to a request with that scope, path and method."""
        if self.methods and method not in self.methods:
            return False
        if self.scope:
            return self.scope == scope
        if self.path_prefix:
            return path.startswith(self.path_prefix)
        return True

    def applies_in(self, country: str | None) -> bool:
        """Whether this limit applies to a request from ``country`` (None: not known). A limit kept to some
        countries applies only to requests known to come from one of them."""
        return not self.countries or country in self.countries

    def same_target(self, other: LimitRule) -> bool:
        """Whether ``other`` guards the same requests (used to compare plans)."""
        return (
            self.scope, self.path_prefix, self.methods, self.algorithm == "budget", self.period, self.countries,
        ) == (
            other.scope, other.path_prefix, other.methods, other.algorithm == "budget", other.period, other.countries,
        )  # fmt: skip

    def with_rates(self, rates: tuple[Rate, ...]) -> LimitRule:
        """A copy with other rates (a subscription's override)."""
        return LimitRule(
            id=self.id, name=self.name, rates=rates, algorithm=self.algorithm,
            scope=self.scope, path_prefix=self.path_prefix, methods=self.methods,
            burst=self.burst, weight=self.weight, max_delay=self.max_delay,
            shadow=self.shadow, refund_on_error=self.refund_on_error, period=self.period,
            anchor_day=self.anchor_day, currency=self.currency, price_micros=self.price_micros,
            countries=self.countries,
        )  # fmt: skip

    def anchored(self, day: int) -> LimitRule:
        """A copy whose billing month starts on ``day`` (a subscription's anchor)."""
        copy = self.with_rates(self.rates)
        object.__setattr__(copy, "anchor_day", day)
        object.__setattr__(copy, "windows", tuple(copy._compile()))
        return copy


def _policy_items(window: Window, policy_sf: str) -> tuple[str, str]:
    """A window's ``RateLimit-Policy`` item (docs/responses.md): for a request taking one unit of it, and for one
    taking other than one (its unit is then said: ``qu="requests"``, the closest registered unit).

    ``q`` is always the full quota (an adaptive multiplier shows in ``r``); ``w`` only for a window of fixed
    length: a concurrency limit has none (``qu="concurrent-requests"``), and a calendar period names itself
    in ``quotas-period`` (a month is 28 to 31 days).
    """
    item = f"{policy_sf};q={window.quota}"
    if window.algorithm == "concurrency":
        item += ';qu="concurrent-requests"'
        return item, item
    length = f';quotas-period="{window.period}"' if window.period else f";w={window.window}"
    units = f'{item};qu="requests"{length}'
    if window.algorithm == "period_quota":  # always counts units
        return units, units
    one = item + length
    return one, one if window.counts_requests else units


def sf_string(value: str) -> str:
    """``value`` as an RFC 8941 structured-field string (printable ASCII, escaped)."""
    clean = "".join(c if " " <= c <= "~" else "?" for c in value)
    return '"' + clean.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _window_label(seconds: int) -> str:
    for unit, name in ((86400, "d"), (3600, "h"), (60, "m")):
        if seconds % unit == 0:
            return f"{seconds // unit}{name}"
    return f"{seconds}s"


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

    @property
    def rules_key(self) -> tuple:
        """What makes this subscriber's limits differ from its plan's."""
        return (self.overrides, self.budgets, self.anchor_day)


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
        if subscriber.anchor_day != 1:
            out = [r.anchored(subscriber.anchor_day) if r.period == "billing_month" else r for r in out]
        return tuple(out)

    def for_request(
        self, plan_id: int | None, subscriber: Subscriber | None, scope: str, path: str, method: str
    ) -> RequestRules:
        """What a request with that scope, path and method needs of the plan (as it applies to ``subscriber``):
        its matching windows and its list price, worked out once per snapshot and then looked up."""
        cache_key = (plan_id, subscriber.rules_key if subscriber else None)
        index = self._index_cache.get(cache_key)
        if index is None:
            index = self._index_cache[cache_key] = _PlanIndex(self.limits_for(plan_id, subscriber))
        return index.lookup(scope, path, method)

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

    @classmethod
    def of(cls, rules: Iterable[LimitRule]) -> RequestRules:
        """The windows and price of the matching limits ``rules`` (those kept to countries set apart)."""
        rules = tuple(rules)
        anywhere = [r for r in rules if not r.countries]
        by_country = rules if len(anywhere) < len(rules) else ()
        return cls(tuple(w for r in anywhere for w in r.windows), sum(r.price_micros for r in anywhere), by_country)

    def in_country(self, country: str | None) -> RequestRules:
        """What a request from ``country`` (None: not known) needs: the limits for every country, and those
        kept to countries that include it, in the plan's order."""
        rules = [r for r in self.by_country if r.applies_in(country)]
        return RequestRules(tuple(w for r in rules for w in r.windows), sum(r.price_micros for r in rules))


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
        matched = tuple(p for p in self.prefixes if path.startswith(p))
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


@lru_cache(maxsize=512)
def code_rule(rule_id: str, name: str, rate: str, algorithm: str) -> LimitRule:
    """A limit given in code rather than by a plan (a decorator's ``rate``, a ``PATH_LIMITS`` entry, DRF's
    rates), compiled once per value: a LimitRule parses its rates and packs its specs when built.

    Raises :class:`~quotas.exceptions.InvalidRate` for a malformed ``rate``.
    """
    return LimitRule(id=rule_id, name=name, rates=parse_rates(rate), algorithm=algorithm)


def code_rate_algorithm() -> str:
    """The algorithm a rate string given in code or in DRF's settings is counted with, in every front door:
    ``QUOTAS['DRF_ALGORITHM']`` (DRF's own meaning of "N/period")."""
    return str(quota_settings.DRF_ALGORITHM)


def drf_rates() -> dict[str, Any]:
    """``REST_FRAMEWORK['DEFAULT_THROTTLE_RATES']``, read from Django's settings at call time (the plain
    Django front doors honour it too, without importing DRF)."""
    rates = (getattr(settings, "REST_FRAMEWORK", None) or {}).get("DEFAULT_THROTTLE_RATES") or {}
    return rates if isinstance(rates, dict) else {}


def drf_scope_rule(scope: str, rate: str | None = None, algorithm: str | None = None) -> LimitRule | None:
    """The limit DRF's throttles give ``scope``: ``rate``, else ``DEFAULT_THROTTLE_RATES[scope]`` (None
    without one), counted with ``algorithm`` or :func:`code_rate_algorithm`. Every front door builds DRF's
    rates here, so a DRF view and a plain Django view of one scope spend the same window."""
    rate = rate or drf_rates().get(scope)
    if not rate:
        return None
    return code_rule(f"drf.{scope}", scope, rate, algorithm or code_rate_algorithm())
