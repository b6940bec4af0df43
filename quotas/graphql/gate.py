"""The quota check of a GraphQL request: read it, bound it, weigh it, and ask the service once.

What :func:`quotas.django.decorators.quota_limited` does for a plain view,
for a GraphQL endpoint, whichever library serves it. In order:

1. **read**: the operations the library will run, read by the library's own
   parsing (the view's reader: :mod:`quotas.graphql.graphene`,
   :mod:`quotas.graphql.strawberry`; :func:`~quotas.graphql.operations.operations_of`
   for a view without one). A request the reader cannot read is the library's
   to answer with its own error: it is counted as an ordinary request;
2. **bound before parsing**: documents longer than
   ``QUOTAS['GRAPHQL_MAX_QUERY_BYTES']`` (a batch's added up) are refused
   unparsed; each document is then parsed with at most
   ``QUOTAS['GRAPHQL_MAX_TOKENS']`` tokens (graphql-core stops at the next);
3. **weigh**: the complexity (:mod:`quotas.graphql.complexity`), summed over
   a batch. An operation that does not parse, or names no single operation,
   counts 1: the library answers it with its own error. At least 1;
4. **one decision**: the service decides with ``weight`` = the complexity
   (every window of the plan counts it as that many units), the limits' prices
   charged per unit of it (``price_per_unit``). A request refused in 2 or 3
   (too long, too many tokens, too deep, over the cap: the view's
   ``max_complexity``, else ``QUOTAS['GRAPHQL_MAX_COMPLEXITY']``) is asked for
   with weight 1: it spends one unit, so a flood of them meets the client's
   limits; if they refuse it, that refusal (429, 403...) is the answer, else
   the 400 ``query-too-complex``, with the ``RateLimit`` headers;
5. a refusal is a GraphQL error (:mod:`quotas.graphql.responses`) with the
   REST refusal's status and headers; an admitted request runs the view, is
   settled after it, and carries the ``RateLimit`` headers;
6. while the view runs, its library's execution hook checks that what it
   is about to run is an operation weighed in 1-3 (the view's
   ``quota_admit``), and refuses anything else with :class:`Unweighed`
   (400 ``query-not-weighed``): no reading of the request, present or future,
   runs unweighed.

The decision comes after the (bounded) parse, not before it: the service
decides a request in one store call, and the weight must be known for it. A
client its limits refuse anyway is told so without a parse only when its
documents are over the length bound; otherwise its documents are parsed first,
which the bounds keep to about 0.1 s at most (10,000 tokens) and well under a
millisecond for an ordinary query.

A request that carries no operation (GraphiQL's page) is counted as an
ordinary request, with the limits' own weights and prices.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from django.http import HttpRequest, HttpResponse

from quotas import problems
from quotas.decide import Facts, Verdict
from quotas.django.respond import agate, facts_for, gate
from quotas.engine import Engine, default_engine
from quotas.graphql.complexity import TooDeep, TooManyTokens, document_complexity, parse_query
from quotas.graphql.operations import Operation, Unreadable, operations_of
from quotas.graphql.responses import graphql_refusal, refusal_of
from quotas.settings import quota_settings

#: A view's reader: the operations of the request it was made for (raises Unreadable).
Read = Callable[[], Sequence[Operation]]
#: An async view's reader.
AsyncRead = Callable[[], Awaitable[Sequence[Operation]]]


class Unweighed(Exception):
    """A library was about to run an operation the gate did not weigh for this request (step 6)."""


@dataclass(frozen=True, slots=True)
class Weighed:
    """What a request spends: ``weight`` (None: an ordinary request, the limits' own weights), and the 400
    problem it is answered with after spending it when a bound or the cap refuses it (``weight`` is then 1)."""

    weight: int | None
    problem: dict[str, Any] | None = None


def weigh(operations: Sequence[Operation], cap: int) -> Weighed:
    """Steps 2 and 3 of the module docstring for ``operations``, under the complexity ``cap``."""
    runnable = [operation for operation in operations if operation.query is not None]
    if not runnable:  # no query: the library answers, counted as any request
        return Weighed(None)
    size = sum(_length(operation.query) for operation in runnable)
    if size > quota_settings.GRAPHQL_MAX_QUERY_BYTES:
        return Weighed(1, problems.query_too_large("bytes", size, quota_settings.GRAPHQL_MAX_QUERY_BYTES))
    max_tokens = quota_settings.GRAPHQL_MAX_TOKENS
    try:
        complexity = request_complexity(runnable, max_tokens=max_tokens)
    except TooManyTokens:
        return Weighed(1, problems.query_too_large("tokens", None, max_tokens))
    except TooDeep:
        return Weighed(1, problems.query_too_complex(None, cap))
    if complexity is not None and complexity > cap:
        return Weighed(1, problems.query_too_complex(complexity, cap))
    return Weighed(complexity)


def request_complexity(operations: Sequence[Operation], max_tokens: int | None = None) -> int | None:
    """What a request of ``operations`` spends (step 3 of the module docstring); None when it carries none.

    Raises :class:`~quotas.graphql.complexity.TooManyTokens` when its documents have more than ``max_tokens``
    tokens together, :class:`~quotas.graphql.complexity.TooDeep` for one too deeply nested to weigh.
    """
    if not operations:
        return None
    total, budget = 0, max_tokens
    for operation in operations:
        query, name = operation.query, operation.operation_name
        complexity = None
        # A query or a name of the wrong type: the library refuses it with its own error.
        if isinstance(query, str) and (name is None or isinstance(name, str)):
            document = parse_query(query, budget)
            if document is not None:
                complexity = document_complexity(document, name)
                if budget is not None:  # a batch shares the bound (graphql-core < 3.2.14 counts no tokens)
                    budget -= getattr(document, "token_count", 0)
        total += 1 if complexity is None else complexity
    return max(total, 1)


def limit_graphql(
    request: HttpRequest,
    view: Callable[[], HttpResponse],
    *,
    scope: str = "",
    max_complexity: int | None = None,
    read: Read | None = None,
    engine: Engine = default_engine,
) -> HttpResponse:
    """``view()``'s response to the GraphQL ``request``, or the refusal that replaces it (module docstring).

    ``scope`` selects the plan's limits as a DRF view's ``quota_scope`` does; ``max_complexity`` overrides
    ``QUOTAS['GRAPHQL_MAX_COMPLEXITY']`` for this endpoint; ``read`` gives the operations as the library
    reads them (without it, :func:`~quotas.graphql.operations.operations_of`); ``engine`` decides.
    """
    if not engine.settings.ENABLED:
        return view()
    try:
        operations = read() if read is not None else operations_of(request)
    except Unreadable:
        operations = ()
    weighed = weigh(operations, _cap(max_complexity))
    return gate(request, _facts(request, scope, weighed), view, refuse=partial(_refused, weighed), engine=engine)


async def alimit_graphql(
    request: HttpRequest,
    view: Callable[[], Awaitable[HttpResponse]],
    *,
    scope: str = "",
    max_complexity: int | None = None,
    read: AsyncRead | None = None,
    engine: Engine = default_engine,
) -> HttpResponse:
    """:func:`limit_graphql` for an async view: the decision is awaited (redis-py's asyncio client), and what
    may block (the rules, settling) runs in asgiref's worker thread, as for ``@quota_limited`` async views."""
    if not engine.settings.ENABLED:
        return await view()
    try:
        operations = await read() if read is not None else operations_of(request)
    except Unreadable:
        operations = ()
    weighed = weigh(operations, _cap(max_complexity))  # parsing only, bounded: no I/O
    refuse = partial(_refused, weighed)
    return await agate(request, _facts(request, scope, weighed), view, refuse=refuse, engine=engine)


def _cap(max_complexity: int | None) -> int:
    return quota_settings.GRAPHQL_MAX_COMPLEXITY if max_complexity is None else max_complexity


def _facts(request: HttpRequest, scope: str, weighed: Weighed) -> Facts:
    """The facts of a GraphQL ``request`` weighed by its complexity, priced per unit of it."""
    facts = facts_for(request, scope, weight=weighed.weight)
    facts.price_per_unit = True
    return facts


def _refused(weighed: Weighed, request: HttpRequest, verdict: Verdict) -> HttpResponse | None:
    """The response that replaces the view's: the service's refusal, else the 400 of a request refused by a
    bound or the cap (it spent its unit); None for an admitted request."""
    if verdict.refusal is not None:
        return refusal_of(verdict.refusal)
    if weighed.problem is not None:
        return graphql_refusal(weighed.problem)
    return None


def _length(query: Any) -> int:
    """A query's length in UTF-8 bytes (what GRAPHQL_MAX_QUERY_BYTES bounds); 0 for one of the wrong type.

    ``surrogatepass``: JSON may carry a lone surrogate (``"\\ud800"``), which strict UTF-8 refuses to encode.
    """
    return len(query.encode("utf-8", "surrogatepass")) if isinstance(query, str) else 0
