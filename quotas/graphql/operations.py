"""The GraphQL operations one HTTP request asks for: what the gate weighs, and its fallback reading.

An :class:`Operation` is what a GraphQL library is about to run: a document
and the name of the operation in it, as the library read them from the
request. The library's own view reads them (:mod:`quotas.graphql.graphene`,
:mod:`quotas.graphql.strawberry`), so what is weighed is what runs; a reader
that cannot read a request raises :class:`Unreadable`, and the library answers
it with its own error.

:func:`operations_of` is the fallback for a view that gives no reader (a
Django view of another library behind ``QuotaGraphQLMixin``): it reads the
request the way GraphQL over HTTP usually puts it, without consuming anything
the view reads after (Django keeps ``request.body`` once read, and
``request.POST`` once parsed):

- ``GET ?query=...&operationName=...``;
- ``POST`` with ``application/json``: ``{"query": ..., "operationName": ...}``,
  or a list of them (a batch);
- ``POST`` with ``application/graphql``: the body is the query;
- ``POST`` with a form body: its ``query`` field; with ``multipart/form-data``,
  the ``operations`` field of the GraphQL multipart request spec (uploads);
- a ``query`` in the URL of a ``POST`` is read too.

A library may read a request otherwise (graphene-django and strawberry do:
see their modules), so the fallback is only as exact as the view is
conventional. What is not a GraphQL request (GraphiQL's page, a body that is
not JSON) gives no operation: the view answers it, counted as an ordinary
request.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest
from django.http.multipartparser import MultiPartParserError


@dataclass(frozen=True, slots=True)
class Operation:
    """One operation to run: the query and the name of the operation in it (None: its only one), exactly as the
    library will pass them to graphql-core. Either may be of the wrong type (JSON gives what the client sent):
    the library then answers with its own error, and the gate counts the operation 1."""

    query: Any
    operation_name: Any = None


class Unreadable(Exception):
    """A reader could not read the request (not JSON, a content type the library refuses...): the library will
    answer it with its own error, without running anything."""


def operations_of(request: HttpRequest) -> list[Operation]:
    """Every operation ``request`` asks for (see the module docstring); empty when it asks for none we can read.

    A value of the wrong type (a number as ``query``) is an operation of its own text, so it is still counted:
    the GraphQL library answers it with its own error.
    """
    found = _from_params(request.GET)
    if request.method == "POST":
        found += _from_body(request)
    return found


def _from_body(request: HttpRequest) -> list[Operation]:
    content_type = request.content_type or ""
    try:
        if content_type == "application/json":
            return _from_json(json.loads(request.body))
        if content_type == "application/graphql":
            return [Operation(request.body.decode(), _name(request.GET.get("operationName")))]
        if content_type == "multipart/form-data":
            return _from_json(json.loads(request.POST.get("operations") or "null"))
        if content_type == "application/x-www-form-urlencoded":
            return _from_params(request.POST)
    except (ValueError, MultiPartParserError):  # not JSON, not UTF-8, a broken form: the library's to answer
        return []
    return []


def _from_json(data: Any) -> list[Operation]:
    """The operations of a decoded JSON body: one object, or a batch (a list of them)."""
    items = data if isinstance(data, list) else [data]
    return [_operation(item.get("query"), item.get("operationName")) for item in items if isinstance(item, dict)]


def _from_params(params: Any) -> list[Operation]:
    query = params.get("query")
    return [_operation(query, params.get("operationName"))] if query is not None else []


def _operation(query: Any, name: Any) -> Operation:
    return Operation(query if isinstance(query, str) else "", _name(name))


def _name(name: Any) -> str | None:
    return name if isinstance(name, str) and name else None
