"""A limit and its windows, as the engine compiles them: what a plan's limit, a decorator's ``rate`` or
DRF's rates become (:class:`LimitRule`, one :class:`Window` per rate), ready to be sent to Redis and shown
in headers. :mod:`quotas.rules.snapshot` holds them per plan.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from django.conf import settings

from quotas.contract.keys import window_field
from quotas.contract.protocol import ALGORITHM_CODES, WindowSpec
from quotas.formats.periods import period_bounds
from quotas.formats.rates import Rate, parse_rates
from quotas.settings import quota_settings

#: Marks a subscription override that lifts a limit entirely.
UNLIMITED = None
#: ``set_by`` of a limit a subscription's owners set for themselves (a spending cap below the plan's budget).
SET_BY_CUSTOMER = "customer"
#: ``set_by`` of an API key's own limit (a lower rate or spending cap its owners gave that key).
SET_BY_KEY = "key"


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
    set_by: str = ""  # who set it, when not the plan: SET_BY_CUSTOMER (a spending cap), SET_BY_KEY (a key's own)
    # Money windows of a subscription that set alert thresholds of its own: those percents, reported as its spend
    # is committed (quotas.observability.events.own_crossings). Not part of a window's identity: the same counter,
    # limited the same way.
    alerts: tuple[int, ...] = field(default=(), compare=False)
    # A customer's cap lowering a budget: the budget's (name, amount), which its thresholds are reported against
    # too (what the owner pays for, beside what it allowed itself).
    lowered: tuple[str, int] | None = field(default=None, compare=False)
    spec: bytes = field(init=False, compare=False)  # this window as decide.lua reads it (rolling windows)
    policy_sf: str = field(init=False, compare=False)  # the policy name as a structured-field string
    # Header text that never changes for a window, made once here rather than on every response
    # (quotas.http.headers puts them together): with settings kept once read (quotas.settings), about 5 us of a
    # busy client's 37 (docs/benchmark-history.md).
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

    def period_end(self, now: float) -> float:
        """The end (epoch seconds) of the period holding ``now``, for a period window where no state of the store
        says it."""
        return float(period_bounds(self.period, now, quota_settings.BUDGET_TIME_ZONE, self.anchor_day).end)

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
    set_by: str = ""  # see Window.set_by: a refusal by a limit the customer set names it as theirs
    # See Window.alerts and Window.lowered (money limits only). Left out of comparisons, so of the hash a
    # subscriber's rules are looked up by on every request (Subscriber.rules_key names its thresholds itself).
    alerts: tuple[int, ...] = field(default=(), compare=False)
    lowered: tuple[str, int] | None = field(default=None, compare=False)
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
                set_by=self.set_by,
                alerts=self.alerts,
                lowered=self.lowered,
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
            countries=self.countries, set_by=self.set_by, alerts=self.alerts, lowered=self.lowered,
        )  # fmt: skip

    def with_alerts(self, percents: tuple[int, ...]) -> LimitRule:
        """A copy whose windows report a subscription's own alert thresholds ``percents``."""
        return replace(self, alerts=percents, windows=())  # windows=(): compiled again, with the percents

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
