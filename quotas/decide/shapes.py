"""The data of one decision: what an adapter knows of a request (:class:`Facts`), and what it is told
(:class:`Verdict`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.http import HttpRequest

from quotas.exceptions import ProblemException
from quotas.identity.clients import Client
from quotas.rules.limits import LimitRule
from quotas.store.decision import Decision

if TYPE_CHECKING:
    from quotas.engine import Engine


# Not frozen: a frozen dataclass's __init__ sets each field through object.__setattr__, a few
# microseconds per request on the hot path for a guarantee nothing here needs.
@dataclass(slots=True)
class Facts:
    """What an adapter knows about one request.

    ``request`` is the framework's request (DRF's, or Django's): where the view
    reports its actual cost, and what the audit log describes. ``auth`` is what
    authentication found (DRF's ``request.auth``). ``limits`` are limits the
    code gave (a decorator's ``rate``), which apply whatever the plans say;
    ``fallback`` are the limits of a client no plan covers (DRF's rates).
    ``weight`` overrides each window's own weight; ``cost_micros`` is the
    view's estimate, or None for the limits' prices; ``price_per_unit``
    charges the limits' prices once per unit of ``weight`` rather than once
    per request (a GraphQL query priced by its complexity, quotas.graphql).

    For an API's own housekeeping views (the usage API), limited apart from
    the API they serve: ``scope_limits_only`` applies only the plan's limits
    that name ``scope`` (with none, the ``fallback`` limits), never its
    plan-wide, path or budget limits; ``metered`` False counts the decision
    neither in the client's usage, nor in the history of plans and scopes,
    nor toward its plan's bans (metrics, the audit log and the last refusals
    still see it).

    ``priced`` False is a further decision on a request another decision
    already priced (a second throttle class of the view, counting clients
    otherwise): only its rate windows, at no cost, no budget, and not counted
    in usage again.

    ``client`` is the client whose counters the request spends, when the
    adapter resolved it itself (DRF's ``get_cache_key``, a decorator's
    ``key=``: see :func:`identified`); None lets the service identify it.
    """

    http_request: HttpRequest
    request: Any = None
    user: Any = None
    auth: Any = None
    scope: str = ""
    limits: tuple[LimitRule, ...] = ()
    fallback: tuple[LimitRule, ...] = ()
    weight: int | None = None
    cost_micros: int | None = None
    price_per_unit: bool = False
    client: Client | None = None
    scope_limits_only: bool = False
    metered: bool = True
    priced: bool = True


@dataclass(slots=True)
class Verdict:
    """What :func:`check` decided: the decision to settle after the view, and the refusal to answer with.

    ``decision`` is None when nothing was decided (no limit applies and no
    plan exists, the request is not limited, or limits are off); ``refusal``
    is None when the request is admitted. ``to_settle`` is False when the
    service found that settling has nothing to do unless the view fails or
    reports an actual cost (no concurrency lease to end, no budget alert
    waiting): a front door then settles nothing after a plain answer.
    ``engine`` is the engine that decided, which settles the decision.
    """

    client: Client | None = None
    plan_id: int | None = None
    decision: Decision | None = None
    refusal: ProblemException | None = None
    request: Any = None
    to_settle: bool = True  # True unless the service knows better: settle() then decides
    engine: Engine | None = None

    @property
    def allowed(self) -> bool:
        """Whether the request may go on to the view."""
        return self.refusal is None
