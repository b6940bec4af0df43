"""The quota check of a GraphQL request: weigh its operations, cap them, and ask the service.

What :func:`quotas.django.decorators.quota_limited` does for a plain view,
for a GraphQL endpoint, whichever library serves it. In order:

1. the operations of the request (:mod:`quotas.graphql.operations`) and
   their complexity (:mod:`quotas.graphql.complexity`), summed over a batch.
   An operation that does not parse, or names no single operation, counts 1:
   the GraphQL library answers it with its own error, but it is still a
   request. A request spends at least 1 (``{ __typename }`` is not free);
2. a request over the cap (the view's ``max_complexity``, else
   ``QUOTAS['GRAPHQL_MAX_COMPLEXITY']``) is refused with 400
   (``query-too-complex``) before Redis is asked, as a REST request whose
   weight is out of bounds is: nothing is spent;
3. the service decides with ``weight`` = the complexity (every window of the
   plan counts it as that many units) and the limits' prices charged per unit
   of it (``price_per_unit``): a query of complexity 12 under a limit priced
   0.001 is charged 0.012 to the client's budgets;
4. a refusal is a GraphQL error (:mod:`quotas.graphql.responses`) with the
   REST refusal's status and headers; an admitted request runs the view, is
   settled after it, and carries the ``RateLimit`` headers.

A request that carries no operation (GraphiQL's page) is counted as an
ordinary request, with the limits' own weights and prices.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse

from quotas import problems
from quotas.conf import quota_settings
from quotas.django.respond import arespond, facts_for, finished, respond
from quotas.graphql.complexity import TooDeep, query_complexity
from quotas.graphql.operations import Operation, operations_of
from quotas.graphql.responses import graphql_refusal, refusal_of
from quotas.service import Facts, check, check_async


def request_complexity(operations: list[Operation]) -> int | None:
    """What a request of ``operations`` spends (see the module docstring); None when it carries none.

    Raises :class:`~quotas.graphql.complexity.TooDeep` for a document too deeply nested to weigh.
    """
    if not operations:
        return None
    total = 0
    for operation in operations:
        complexity = query_complexity(operation.query, operation.operation_name)
        total += 1 if complexity is None else complexity
    return max(total, 1)


def limit_graphql(
    request: HttpRequest, view: Callable[[], HttpResponse], *, scope: str = "", max_complexity: int | None = None
) -> HttpResponse:
    """``view()``'s response to the GraphQL ``request``, or the refusal that replaces it (module docstring).

    ``scope`` selects the plan's limits as a DRF view's ``quota_scope`` does; ``max_complexity`` overrides
    ``QUOTAS['GRAPHQL_MAX_COMPLEXITY']`` for this endpoint.
    """
    if not quota_settings.ENABLED:
        return view()
    weighed = _weigh(request, scope, max_complexity)
    if isinstance(weighed, HttpResponse):
        return weighed
    verdict = check(weighed)
    if verdict.refusal is not None:
        return finished(request, verdict, refusal_of(verdict.refusal))
    return respond(request, verdict, view)


async def alimit_graphql(
    request: HttpRequest,
    view: Callable[[], Awaitable[HttpResponse]],
    *,
    scope: str = "",
    max_complexity: int | None = None,
) -> HttpResponse:
    """:func:`limit_graphql` for an async view: the decision is awaited (redis-py's asyncio client), and what
    may block (the rules, settling) runs in asgiref's worker thread, as for ``@quota_limited`` async views."""
    if not quota_settings.ENABLED:
        return await view()
    weighed = _weigh(request, scope, max_complexity)  # parsing only: no I/O
    if isinstance(weighed, HttpResponse):
        return weighed
    verdict = await check_async(weighed)
    if verdict.refusal is not None:
        return await sync_to_async(finished)(request, verdict, refusal_of(verdict.refusal))
    return await arespond(request, verdict, view)


def _weigh(request: HttpRequest, scope: str, max_complexity: int | None) -> Facts | HttpResponse:
    """The facts of a GraphQL ``request`` weighed by its complexity, or the 400 of one over the cap."""
    cap = quota_settings.GRAPHQL_MAX_COMPLEXITY if max_complexity is None else max_complexity
    try:
        complexity = request_complexity(operations_of(request))
    except TooDeep:
        return graphql_refusal(problems.query_too_complex(None, cap))
    if complexity is not None and complexity > cap:
        return graphql_refusal(problems.query_too_complex(complexity, cap))
    facts = facts_for(request, scope, weight=complexity)
    facts.price_per_unit = True
    return facts
