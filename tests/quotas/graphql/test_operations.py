"""What one HTTP request asks a GraphQL endpoint for, read by the fallback (quotas/graphql/operations.py), and
what it spends (quotas/graphql/gate.py's weigh and request_complexity)."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import RequestFactory

from tests.conftest import import_extra

import_extra("graphql")

from quotas.graphql.complexity import TooManyTokens  # noqa: E402
from quotas.graphql.gate import Weighed, request_complexity, weigh  # noqa: E402
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


def test_a_query_or_name_of_the_wrong_type_counts_one():
    """As a library passes them on: a query that is not a string, or a name that is neither None nor a string,
    is refused by graphql-core (1 here); an empty name names no operation (1), it does not mean "the only one"."""
    assert request_complexity([Operation(5)]) == 1
    assert request_complexity([Operation("{ a { b } }", ["x"])]) == 1
    assert request_complexity([Operation("{ a { b } }", "")]) == 1
    assert request_complexity([Operation("query Q { a { b } }", "Q")]) == 3


def test_a_batch_shares_the_token_bound():
    """Two documents of 6 tokens each: within 12 together, over 11 (the second parse stops)."""
    batch = [Operation("{ a { b } }"), Operation("{ a { b } }")]
    assert request_complexity(batch, max_tokens=12) == 6
    with pytest.raises(TooManyTokens):
        request_complexity(batch, max_tokens=11)


def test_what_weigh_refuses_and_charges(set_quotas):
    """No query: an ordinary request (None). Over the cap, too long, too many tokens: weight 1 and the 400's
    problem. The length is UTF-8 bytes, a lone surrogate (which JSON can carry) included."""
    assert weigh([Operation(None)], cap=10) == Weighed(None)
    assert weigh([Operation("{ a { b } }")], cap=10) == Weighed(3)
    over = weigh([Operation("{ a { b } }")], cap=2)
    assert (over.weight, over.problem["reason"], over.problem["complexity"]) == (1, "query_too_complex", 3)
    set_quotas(GRAPHQL_MAX_QUERY_BYTES=10, GRAPHQL_MAX_TOKENS=5)
    long = weigh([Operation("{ a }"), Operation('{ a(s: "\ud800é") }')], cap=10)
    # 5, then 8 + 3 (the surrogate) + 2 (é) + 4
    assert (long.weight, long.problem["bound"], long.problem["size"]) == (1, "bytes", 5 + 17)
    set_quotas(GRAPHQL_MAX_QUERY_BYTES=100)
    many = weigh([Operation("{ a { b } }")], cap=10)
    assert (many.weight, many.problem["bound"], many.problem["maximum"]) == (1, "tokens", 5)
