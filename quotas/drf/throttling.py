"""The DRF throttle: :class:`QuotaThrottle`, for ``throttle_classes``.

It keeps DRF's hooks (``allow_request``, ``wait``, ``get_ident``,
``get_cache_key``) and only translates: it builds the request's
:class:`~quotas.decide.Facts` (DRF's user and auth, the view's scope, weight
and cost, DRF's rates as the fallback, the client its own hooks count the
request as), asks :func:`quotas.decide.check`, and
raises a refusal as the DRF exception it is (a
:class:`~rest_framework.exceptions.Throttled` for a 429) carrying its
problem+json body. The verdict is left on the request for
:class:`quotas.http.middleware.QuotaHeadersMiddleware` (headers, settling after
the view).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from quotas.decide import Facts, Verdict, check, identified, send_alerts
from quotas.drf.exceptions import drf_exception
from quotas.engine import Engine, default_engine
from quotas.exceptions import InvalidQuotaRequest
from quotas.formats.money import to_micros
from quotas.http.context import HANDLING, SETTLING_MIDDLEWARE, STATE_KEY, RequestState
from quotas.identity.addresses import address_group
from quotas.identity.clients import Client, identify
from quotas.rules.limits import LimitRule, drf_scope_rule


class QuotaThrottle(BaseThrottle):
    """Enforces the caller's plan limits (or DRF's own rates) from Redis.

    With plans in the database, a request is checked against its plan's
    limits that match the view's ``quota_scope``, the path and the method.
    With no plans, and for clients no plan covers (no subscription and no
    default plan), it honours DRF's configuration like DRF's throttles do
    (:meth:`get_drf_limits`): a ``rate`` (or ``scope``) attribute on a
    subclass, else the view's ``throttle_scope`` rate together with the
    ``anon``/``user`` rates of ``REST_FRAMEWORK['DEFAULT_THROTTLE_RATES']``,
    all in one decision, counted by ``QUOTAS['DRF_ALGORITHM']``.

    DRF's hooks are honoured on subclasses, in both modes: ``get_ident(request)``
    names an anonymous client, and ``get_cache_key(request, view)`` names the
    client whose counters are spent (return a tenant id to count per tenant),
    or returns None to leave the request unthrottled (nothing spent, no headers).

    A view may set ``quota_weight`` (an int) or define
    ``get_quota_weight(request)`` to spend more than one unit per request,
    and define ``get_quota_cost(request)`` (a Decimal) to estimate its cost.
    Above ``MAX_REQUEST_WEIGHT`` / ``MAX_REQUEST_COST`` the request is refused
    with a 400 problem before Redis is asked; a negative value or one of the
    wrong type is the view's mistake: a ValueError or TypeError naming it.
    """

    #: What decides: the process's engine, or another a subclass (or a test) names, as DRF's throttles hold
    #: ``cache`` and ``timer``.
    engine: Engine = default_engine
    rate: str | None = None
    scope: str | None = None
    #: For an API's own housekeeping views (see quotas.drf.housekeeping.HousekeepingThrottle): ``scope_limits_only``
    #: applies only the plan's limits that name the view's scope (else get_drf_limits' fallback), and
    #: ``metered = False`` counts the requests neither in the client's usage, the history, nor toward bans.
    scope_limits_only: bool = False
    metered: bool = True

    def __init__(self) -> None:
        self._wait: float | None = None
        self._client: Client | None = None

    def allow_request(self, request: Request, view: Any) -> bool:  # noqa: C901  # one function top to bottom
        """True to admit; a refusal raises its DRF exception (429 :class:`~quotas.drf.exceptions.QuotaThrottled`,
        401, 403, 503) after leaving the verdict on the request for the headers.

        A view listing several QuotaThrottle classes (DRF's Burst plus Sustained) gets one decision: the first
        class to run decides for every class that counts the same client the same way (the plan's limits and
        budgets once, and each class's own DRF rates where no plan covers the client), and the others admit.
        The classes are read from the view's ``throttle_classes``; a view that builds its throttles in its own
        ``get_throttles()`` gets one decision per QuotaThrottle. A class that counts otherwise (its own
        ``get_cache_key``, say) decides on its own, but a request is priced once: a decision after the first
        spends its rate windows only (no price, no budget, not counted in usage again). Every verdict is left
        on the request, and the middleware settles each one.
        """
        self._wait = None
        # The Django request DRF's wraps, read directly: each read through DRF's request raises and catches an
        # AttributeError first. It is the one the middleware is handling (HANDLING) when DRF's query_params is its
        # GET (their documented synonym): not for a request a view made and handed to another view in process.
        handling = HANDLING.get()
        http_request = handling if handling is not None and request.query_params is handling.GET else request
        # What the request's front doors leave on it (quotas.http.context.state_of, written out: a call less).
        meta = http_request.META
        state = meta.get(STATE_KEY)
        if state is None:
            state = meta[STATE_KEY] = RequestState()
        decided = state.decided
        if type(self) in decided:
            return True  # decided, with this class's rates, by the first QuotaThrottle of the view
        # This look-up costs nothing beyond the noise (docs/benchmark-history.md).
        throttle_classes = tuple(getattr(view, "throttle_classes", ()))
        engine = self.engine
        partners = engine.throttle_partners.get((type(self), throttle_classes))
        if partners is None:
            partners = _Partners.of(type(self), throttle_classes)
            engine.throttle_partners[type(self), throttle_classes] = partners
        if len(partners.classes) > 1:
            state.decided = decided | set(partners.classes)
        weight = cost = None
        try:
            # The hooks are asked only where they may answer: a subclass's own, or a view with the attributes
            # they read (two calls less on most requests).
            if partners.own_pricing or hasattr(view, "get_quota_weight") or hasattr(view, "quota_weight"):
                weight = self.get_weight(request, view)
            if partners.own_pricing or hasattr(view, "get_quota_cost"):
                cost = self.get_cost(request, view)
        except InvalidQuotaRequest as exc:
            raise drf_exception(exc) from None
        verdicts = state.verdicts  # the verdicts left on the request so far: read, and added to, here
        user = request.user  # a property of DRF's Request: read once
        # DRF's limits as kept (_Partners.drf_limits on a miss), by what they depend on: the classes, the view's
        # throttle_scope and whether the user is authenticated (Engine.drf_limits' key, made here only).
        key = (partners.classes, getattr(view, "throttle_scope", None), user is not None and user.is_authenticated)
        fallback = engine.drf_limits.get(key) if partners.static_limits else None
        if fallback is None:
            fallback = partners.drf_limits(self, request, view, key)
        # __init__ called by keyword as a function: a class call packs keywords in a dict (docs/benchmark-history.md).
        facts = Facts.__new__(Facts)
        Facts.__init__(
            facts,
            http_request=http_request,
            request=request,
            user=user,
            auth=request.auth,
            # The scope the plan's limits are matched by: the view's quota_scope, else DRF's throttle_scope (a plan
            # limit scoped "search" applies to a view with throttle_scope = "search").
            scope=getattr(view, "quota_scope", None) or getattr(view, "throttle_scope", None) or "",
            fallback=fallback,
            weight=weight,
            cost_micros=cost,
            scope_limits_only=self.scope_limits_only,
            metered=self.metered,
            priced=not verdicts,  # only decisions are left there, and the first one priced the request
        )
        verdict = self._checked(facts, request, view) if partners.counts_otherwise else check(engine, facts)
        if verdict.decision is not None:
            verdicts.append(verdict)
            if verdict.to_settle and not _settled_after_view():
                send_alerts(verdict)  # nothing will settle it (quotas.W002): its spend is final as charged
        if verdict.refusal is not None:
            self._wait = verdict.refusal.wait
            raise drf_exception(verdict.refusal)
        return True

    def wait(self) -> float | None:
        """Seconds until the refused request would be admitted (DRF's hook)."""
        return self._wait

    def get_ident(self, request: Request) -> str:
        """The address an anonymous client is counted by (DRF's hook; override it to count otherwise).

        ``REMOTE_ADDR``, or X-Forwarded-For behind ``QUOTAS['TRUSTED_PROXIES']``,
        else behind DRF's ``NUM_PROXIES`` (see :func:`quotas.identity.clients.client_ip`);
        IPv6 clients by their ``IPV6_PREFIX_LENGTH`` prefix.
        """
        return address_group(request)  # DRF's request reads META from Django's

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        """Who this request is counted for (DRF's hook), or None to leave it unthrottled.

        The default names the client identified by API key, user or address,
        e.g. ``"user:42"``. Override it to count otherwise: return the same
        string for every request that should share one set of counters (a
        tenant id counts per tenant), or None for a request that is not
        throttled at all (admitted, nothing spent, no headers).
        """
        client = self._client
        if client is None:  # called outside allow_request()
            client = identify(request, request.user, self.engine.runtime().rules, request.auth)
        return _default_key(client)

    def _checked(self, facts: Facts, request: Request, view: Any) -> Verdict:
        """:func:`~quotas.decide.check` for a subclass with its own ``get_ident`` or ``get_cache_key``: the
        client is identified first, counted as the hooks say (data for the service, which never calls back),
        and a request the hooks leave unthrottled is admitted without a decision."""
        found = identified(self.engine, facts)
        if isinstance(found, Verdict):
            return found  # limits off, or answered without a decision (a bad API key, out of bounds)
        client = found
        if type(self).get_ident is not QuotaThrottle.get_ident and client.kind == "ip":
            client = Client.of_address(str(self.get_ident(request)))
        if type(self).get_cache_key is not QuotaThrottle.get_cache_key:
            self._client = client
            try:
                key = self.get_cache_key(request, view)
            finally:
                self._client = None
            if key is None:
                return Verdict(request=request)  # not throttled: nothing spent, no headers
            if str(key) != _default_key(client):
                # The plan still follows the subscription (API key or user); only whose counters are spent changes.
                client = Client.of_key(str(key), client.subscriber)
        facts.client = client
        return check(self.engine, facts)

    def get_drf_limits(self, request: Request, view: Any) -> tuple[LimitRule, ...]:
        """DRF-compatible limits from ``REST_FRAMEWORK['DEFAULT_THROTTLE_RATES']``, as DRF's classes apply them.

        A subclass with a ``rate`` or ``scope`` attribute is one DRF throttle:
        that rate alone. Otherwise the request gets what AnonRateThrottle,
        UserRateThrottle and ScopedRateThrottle listed together would give it,
        each rate present in the settings being its own window of one decision:
        the view's ``throttle_scope`` rate; for an authenticated user the
        ``user`` rate; for an anonymous client the ``anon`` rate and the ``user``
        rate (DRF's UserRateThrottle counts anonymous clients by address too).
        """
        if self.rate or self.scope:
            scope = self.scope or getattr(view, "throttle_scope", None) or type(self).__name__.lower()
            rule = drf_scope_rule(scope, self.rate)
            return (rule,) if rule is not None else ()
        user = request.user
        scopes = [getattr(view, "throttle_scope", None)]
        scopes += ["user"] if user is not None and user.is_authenticated else ["anon", "user"]
        # A throttle_scope named "user" or "anon" shares DRF's cache key with that class: counted once.
        rules = (drf_scope_rule(s) for s in dict.fromkeys(s for s in scopes if s))
        return tuple(rule for rule in rules if rule is not None)

    def get_cost(self, request: Request, view: Any) -> int | None:
        """The view's estimate of this request's cost in micro-units (``get_quota_cost``), or None.

        None lets the limits' prices decide. Out of bounds is a 400 problem.
        """
        estimate = getattr(view, "get_quota_cost", None)
        amount = estimate(request) if estimate is not None else None
        if amount is None:
            return None
        try:
            micros = to_micros(amount)
        except (TypeError, ArithmeticError, ValueError) as exc:  # a float, NaN, "abc": the view's mistake
            raise TypeError(
                f"{type(view).__name__}.get_quota_cost() gave {amount!r}; a cost is a Decimal from 0 to "
                "QUOTAS['MAX_REQUEST_COST']."
            ) from exc
        return micros  # out of QUOTAS' bounds: the service answers 400 (quotas.decide.hot_path._within_bounds)

    def get_weight(self, request: Request, view: Any) -> int | None:
        """The view's weight for this request, or None for each limit's own weight."""
        getter = getattr(view, "get_quota_weight", None)
        weight = getter(request) if getter is not None else getattr(view, "quota_weight", None)
        if weight is None:
            return None
        # Checked before any Redis call: an enormous weight would make the script fail, and the
        # failure would be Redis's, not this request's.
        if isinstance(weight, bool) or not isinstance(weight, int):
            # Not a number at all: the view's mistake, whatever the request said.
            hook = "get_quota_weight()" if getter is not None else "quota_weight"
            raise TypeError(
                f"{type(view).__name__}.{hook} gave {weight!r}; a quota weight is an int from 0 to "
                "QUOTAS['MAX_REQUEST_WEIGHT'] (validate the request's input in the view)."
            )
        return weight  # out of QUOTAS' bounds: the service answers 400 (quotas.decide.hot_path._within_bounds)


def _default_key(client: Client) -> str:
    return f"{client.kind}:{client.ident}"


@dataclass(frozen=True, slots=True)
class _Partners:
    """The QuotaThrottle classes of a view that one decision serves (the first is the one deciding), and how
    they decide, worked out once per view and class (kept in :attr:`Engine.throttle_partners`)."""

    classes: tuple[type[QuotaThrottle], ...]
    counts_otherwise: bool  # a subclass's own get_ident or get_cache_key names the client
    static_limits: bool  # DRF's limits follow from the classes, the view's throttle_scope and the user's kind
    own_pricing: bool  # a subclass's own get_weight or get_cost

    @classmethod
    def of(cls, throttle: type[QuotaThrottle], throttle_classes: tuple[Any, ...]) -> _Partners:
        """``throttle`` and the other QuotaThrottle classes of a view's ``throttle_classes`` that one decision
        can serve: those that count the same client the same way (the same ``get_ident``, ``get_cache_key``,
        ``scope_limits_only`` and ``metered``). A class that differs decides on its own, as a separate throttle
        must."""
        mine = _decision_shape(throttle)
        others = tuple(
            other
            for other in throttle_classes
            if isinstance(other, type) and issubclass(other, QuotaThrottle) and other is not throttle
            and _decision_shape(other) == mine
        )  # fmt: skip
        classes = (throttle, *others)
        own_hooks = (throttle.get_ident, throttle.get_cache_key)
        counts_otherwise = own_hooks != (QuotaThrottle.get_ident, QuotaThrottle.get_cache_key)
        # QuotaThrottle's own get_drf_limits reads only the class's rate and scope, the view's throttle_scope,
        # whether the user is authenticated, and the settings: its limits can be kept. An override may read
        # anything of the request: asked per request.
        static = all(
            c.get_drf_limits is QuotaThrottle.get_drf_limits and c.__init__ is QuotaThrottle.__init__ for c in classes
        )
        own_pricing = (throttle.get_weight, throttle.get_cost) != (QuotaThrottle.get_weight, QuotaThrottle.get_cost)
        return cls(classes, counts_otherwise, static, own_pricing)

    def drf_limits(
        self, throttle: QuotaThrottle, request: Request, view: Any, key: tuple[Any, ...]
    ) -> tuple[LimitRule, ...]:
        """DRF's limits of a client no plan covers: those of every class, each once (see
        :meth:`QuotaThrottle.get_drf_limits`). With static limits, kept under ``key`` (the view's scope and kind
        of user, in :attr:`Engine.drf_limits`) until a setting changes."""
        if not self.static_limits:
            return _drf_limits_of([throttle, *(c() for c in self.classes[1:])], request, view)
        kept = throttle.engine.drf_limits
        limits = kept.get(key)
        if limits is None:
            limits = kept[key] = _drf_limits_of([throttle, *(c() for c in self.classes[1:])], request, view)
        return limits


def _decision_shape(cls: type[QuotaThrottle]) -> tuple[Any, ...]:
    """What must agree for two QuotaThrottle classes to share one decision: whose counters are spent, which
    limits apply and whether usage counts it."""
    return (cls.get_ident, cls.get_cache_key, cls.scope_limits_only, cls.metered)


def _drf_limits_of(throttles: Sequence[QuotaThrottle], request: Request, view: Any) -> tuple[LimitRule, ...]:
    """The DRF-compatible limits of every throttle in ``throttles`` (a client no plan covers), each once."""
    limits: dict[str, LimitRule] = {}
    for throttle in throttles:
        for rule in throttle.get_drf_limits(request, view):
            limits.setdefault(rule.id, rule)
    return tuple(limits.values())


def _settled_after_view() -> bool:
    """Whether QuotaHeadersMiddleware will settle this request's verdict (asked only when it has something to
    settle: budget alerts to send, which happens at most twice per budget and period, concurrency leases, or the
    spend of a subscription with alert thresholds of its own)."""
    return not SETTLING_MIDDLEWARE.isdisjoint(settings.MIDDLEWARE)
