"""What one HTTP request asks a GraphQL endpoint for (quotas/graphql/operations.py), and what it spends
(quotas/graphql/gate.py's request_complexity)."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import RequestFactory

from tests.conftest import import_extra

import_extra("graphql")

from quotas.graphql.gate import request_complexity  # noqa: E402
from quotas.graphql.operations import Operation, operations_of  # noqa: E402

QUERY = "query Q { books { title } }"


@pytest.fixture
def rf() -> RequestFactory:
    return RequestFactory()


def test_a_json_body_and_a_batch(rf):
    """One JSON object is one operation; a list is a batch, each item one."""
    one = rf.post("/graphql", {"query": QUERY, "operationName": "Q"}, content_type="application/json")
    assert operations_of(one) == [Operation(QUERY, "Q")]
    batch = rf.post("/graphql", [{"query": QUERY}, {"query": "{ a }"}], content_type="application/json")
    assert operations_of(batch) == [Operation(QUERY), Operation("{ a }")]


def test_a_get_query_a_graphql_body_and_a_form(rf):
    """GET ?query=, an application/graphql body (operationName in the URL) and a form's query field."""
    assert operations_of(rf.get("/graphql", {"query": QUERY, "operationName": "Q"})) == [Operation(QUERY, "Q")]
    graphql_body = rf.post("/graphql?operationName=Q", QUERY, content_type="application/graphql")
    assert operations_of(graphql_body) == [Operation(QUERY, "Q")]
    assert operations_of(rf.post("/graphql", {"query": QUERY})) == []  # multipart without "operations"
    form = rf.post("/graphql", f"query={QUERY}", content_type="application/x-www-form-urlencoded")
    assert operations_of(form) == [Operation(QUERY)]


def test_a_multipart_upload_is_read_from_its_operations_field(rf):
    """The GraphQL multipart request spec: the operations are the JSON of the ``operations`` field."""
    upload = SimpleUploadedFile("a.txt", b"hello")
    request = rf.post("/graphql", {"operations": json.dumps({"query": QUERY}), "map": "{}", "0": upload})
    assert operations_of(request) == [Operation(QUERY)]


def test_a_post_with_a_query_in_its_url_asks_for_both(rf):
    """graphene-django runs the URL's query before the body's: both are weighed."""
    request = rf.post("/graphql?query={ a }", {"query": QUERY}, content_type="application/json")
    assert operations_of(request) == [Operation("{ a }"), Operation(QUERY)]


@pytest.mark.parametrize(
    ("body", "content_type"),
    [(b"{not json", "application/json"), (b"\xff\xfe", "application/json"), (b"42", "application/json"),
     (b"<xml/>", "text/xml")],
)  # fmt: skip
def test_what_is_not_a_graphql_request_asks_for_nothing(rf, body, content_type):
    """Not JSON, not UTF-8, not an object, another media type: no operation (the library answers)."""
    assert operations_of(rf.post("/graphql", body, content_type=content_type)) == []


def test_a_query_of_the_wrong_type_is_still_an_operation(rf):
    """{"query": 5} is an operation of no text: it spends 1, and the library answers it."""
    request = rf.post("/graphql", {"query": 5, "operationName": ["x"]}, content_type="application/json")
    assert operations_of(request) == [Operation("")]
    assert request_complexity(operations_of(request)) == 1


def test_what_a_request_spends():
    """The sum over a batch; an operation that does not parse counts 1; at least 1; None without any."""
    assert request_complexity([Operation("{ a { b } }"), Operation("{ c }")]) == 3 + 1
    assert request_complexity([Operation("{ a { b } }"), Operation("{ broken")]) == 3 + 1
    assert request_complexity([Operation("{ __typename }")]) == 1
    assert request_complexity([]) is None
