"""The bodies of a request the engine cannot take as it is: a bad API key (401), a weight or cost out of bounds
(400), a GraphQL query too large, too complex or not the one weighed (400), a failed CSRF check (403); and of a
view that reported a cost out of bounds (500, the server's fault)."""

from __future__ import annotations

from typing import Any

from quotas.problems.types import problem_type

_KEY_DETAIL = {
    "malformed": "The API key in the request is malformed: send the key you were issued, "
    "unchanged, in the X-API-Key header.",
    "unknown": "The API key in the request is not known. Check it, or ask for a new one.",
    "revoked": "The API key in the request has been revoked. Ask for a new one.",
    "expired": "The API key in the request has expired. Ask for a new one.",
}


def invalid_api_key(reason: str) -> dict[str, Any]:
    """The 401 body for a malformed, unknown or revoked API key."""
    return {
        "type": problem_type("invalid-api-key"),
        "title": "Invalid API key",
        "status": 401,
        "detail": _KEY_DETAIL[reason],
        "reason": f"api_key_{reason}",
    }


def out_of_bounds(what: str, value: object, maximum: object) -> dict[str, Any]:
    """The 400 body for a request whose weight or cost is out of bounds."""
    return {
        "type": problem_type("request-out-of-bounds"),
        "title": "Request out of bounds",
        "status": 400,
        "detail": f"This request would spend {what} {value}; a request may spend from 0 to {maximum}.",
        "reason": f"quota_{what}_out_of_bounds",
    }


def invalid_reported_cost(error: str) -> dict[str, Any]:
    """The 500 body for a view that reported an actual cost out of bounds (``error`` names the view and the
    value): the server's mistake, found after the view ran; the request is settled as a failed one."""
    return {
        "type": problem_type("invalid-reported-cost"),
        "title": "Invalid reported cost",
        "status": 500,
        "detail": f"The server could not account for this request: {error} It was not charged; this is a "
        "fault of the server, not of the request.",
        "reason": "invalid_reported_cost",
    }


def query_too_complex(complexity: int | None, maximum: int) -> dict[str, Any]:
    """The 400 body for a GraphQL query more complex than its endpoint allows (quotas.graphql); ``complexity``
    None: nested too deeply to be weighed."""
    weighed = (
        f"This query's complexity is {complexity}"
        if complexity is not None
        else "This query nests fields or fragments too deeply to be weighed"
    )
    return {
        "type": problem_type("query-too-complex"),
        "title": "Query too complex",
        "status": 400,
        "detail": f"{weighed}; this endpoint answers queries of complexity up to {maximum}. Select fewer fields, "
        "or nest them less deeply.",
        "reason": "query_too_complex",
        "complexity": complexity,
        "max_complexity": maximum,
    }


def query_too_large(bound: str, size: int | None, maximum: int) -> dict[str, Any]:
    """The 400 body for a GraphQL request refused before it was weighed (quotas.graphql): its documents are
    longer than ``GRAPHQL_MAX_QUERY_BYTES`` (``bound`` "bytes", ``size`` their length), or have more tokens than
    ``GRAPHQL_MAX_TOKENS`` (``bound`` "tokens", ``size`` None: the parse stopped at the first one too many).
    Its type is ``query-too-complex``: the same advice (send a smaller query), a ``reason`` of its own."""
    if bound == "bytes":
        found = f"This request's GraphQL documents are {size:,} bytes long"
        limit = f"refuses, unparsed, documents longer than {maximum:,} bytes (QUOTAS['GRAPHQL_MAX_QUERY_BYTES'])"
    else:
        found = f"This request's GraphQL documents have more than {maximum:,} tokens"
        limit = f"stops parsing documents at {maximum:,} tokens (QUOTAS['GRAPHQL_MAX_TOKENS'])"
    return {
        "type": problem_type("query-too-complex"),
        "title": "Query too complex",
        "status": 400,
        "detail": f"{found}; this endpoint {limit}. Send a shorter query.",
        "reason": "query_too_large",
        "bound": bound,
        "size": size,
        "maximum": maximum,
        "complexity": None,
    }


def query_not_weighed() -> dict[str, Any]:
    """The 400 body for a GraphQL operation its library was about to run although the quota gate had not weighed
    it (quotas.graphql: the library read the request otherwise than the gate did)."""
    return {
        "type": problem_type("query-not-weighed"),
        "title": "Query not weighed",
        "status": 400,
        "detail": "This endpoint was about to run a GraphQL operation other than the one this request was weighed "
        "by, so it ran nothing. Send the query and its operation name in one place: the JSON body, or the URL of "
        "a GET.",
        "reason": "query_not_weighed",
    }


def csrf_failed(reason: str) -> dict[str, Any]:
    """The 403 body for a GraphQL request of a signed-in browser that fails Django's CSRF check (quotas.graphql);
    ``reason`` is Django's (e.g. "CSRF token missing.")."""
    return {
        "type": problem_type("csrf-failed"),
        "title": "CSRF check failed",
        "status": 403,
        "detail": f"This request comes with a signed-in session and failed Django's CSRF check ({reason}), so "
        "nothing ran and nothing was counted. A browser sends its CSRF token (by default the csrftoken cookie's "
        "value) in the X-CSRFToken header; an API client sends its API key.",
        "reason": "csrf_failed",
        "csrf_reason": reason,
    }
