"""The complexity formula (quotas/graphql/complexity.py): every field counted by its depth, fragments expanded,
the parse bounded by tokens. graphql-core only (skipped where no GraphQL extra is installed)."""

from __future__ import annotations

import pytest

from tests.conftest import import_extra

import_extra("graphql")

from quotas.graphql.complexity import TooDeep, TooManyTokens, query_complexity  # noqa: E402


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("{ books }", 1),
        ("{ books { title } }", 1 + 2),
        ("{ books { title author { name } } }", 1 + 2 + 2 + 3),
        ("{ a b c }", 3),
        ("{ a { b { c { d } } } }", 1 + 2 + 3 + 4),
        ("query Q($n: Int) { a(first: $n) @include(if: true) { b } }", 1 + 2),  # arguments and directives: free
        ('mutation { addBook(title: "x") { title } }', 1 + 2),
    ],
)
def test_each_field_counts_its_depth(query, expected):
    """complexity = sum of the depth of every selected field, a root field at depth 1."""
    assert query_complexity(query) == expected


def test_a_named_fragment_counts_where_it_is_spread_and_as_often():
    """F's fields (x at 1, y at 1, z at 2 relative to the spread) count at each spread's depth."""
    query = "fragment F on T { x y { z } } { a { ...F } b { ...F ... on T { w } } }"
    # a (1) + x, y (2 each) + z (3); b (1) + x, y (2 each) + z (3) + w (2)
    assert query_complexity(query) == (1 + 2 + 2 + 3) + (1 + 2 + 2 + 3 + 2)


def test_nested_fragments_are_weighed_once_but_counted_every_time():
    """Thirty fragments, each spreading the one below twice: 2**30 copies of one field, worked out exactly
    (each fragment's weight is reused, not expanded again)."""
    fragments = ["fragment F0 on T { leaf }"]
    fragments += [f"fragment F{i} on T {{ ...F{i - 1} ...F{i - 1} }}" for i in range(1, 31)]
    assert query_complexity(" ".join(fragments) + " { root { ...F30 } }") == 1 + 2 * 2**30


def test_typename_and_introspection_count_like_any_field():
    """__typename counts at its depth, and __schema and __type with all they select (issue 44: they were free or
    1, and graphql-core's validation of a thousand repeated __typename took seconds for one unit)."""
    assert query_complexity("{ books { __typename title } }") == 1 + 2 + 2
    assert query_complexity("{ __typename __typename __typename }") == 3
    assert query_complexity("{ __schema { types { name fields { name } } } }") == 1 + 2 + 3 + 3 + 4
    assert query_complexity('{ __type(name: "Book") { name fields { name } } books { title } }') == (
        (1 + 2 + 2 + 3) + (1 + 2)
    )


def test_graphiqls_introspection_query_weighs_its_fields():
    """graphql-core's introspection query (what GraphiQL sends) weighs 1754, over the default cap of 1000:
    docs/graphql.md says to give the endpoint that serves GraphiQL a cap of its own."""
    from graphql import get_introspection_query

    assert query_complexity(get_introspection_query()) == 1754


def test_the_parse_stops_at_max_tokens():
    """10 tokens: parsed with max_tokens 10, TooManyTokens with 9 (graphql-core's message, which the check
    reads, is pinned here); comments count as tokens; a syntax error is still no figure, whatever the bound."""
    query = "{ books { title author { name } } }"
    assert query_complexity(query, max_tokens=10) == 8
    with pytest.raises(TooManyTokens) as raised:
        query_complexity(query, max_tokens=9)
    assert raised.value.max_tokens == 9
    with pytest.raises(TooManyTokens):
        query_complexity("#1\n#2\n{ books }", max_tokens=2)  # 2 comments, 3 tokens
    assert query_complexity("{ books { title ", max_tokens=100) is None


def test_the_named_operation_is_weighed():
    """With several operations, operationName picks one; without a name, or naming none, there is no figure."""
    document = "query Cheap { a } query Dear { a { b { c } } }"
    assert query_complexity(document, "Cheap") == 1
    assert query_complexity(document, "Dear") == 1 + 2 + 3
    assert query_complexity(document) is None
    assert query_complexity(document, "Other") is None


@pytest.mark.parametrize(
    "query",
    ["{ books { title ", "", "not graphql", "fragment F on T { x }"],  # a syntax error; no operation at all
)
def test_what_does_not_parse_or_has_no_operation_gets_no_figure(query):
    """The GraphQL library answers these with its own error: no complexity here."""
    assert query_complexity(query) is None


def test_unknown_and_cyclic_fragments_weigh_nothing():
    """GraphQL's validation refuses both before anything runs; weighing them must not loop."""
    assert query_complexity("{ a { ...Missing } }") == 1
    assert query_complexity("fragment A on T { x ...B } fragment B on T { y ...A } { r { ...A } }") == 1 + 2 + 2


def test_a_document_too_deep_to_weigh_raises_too_deep():
    """A chain of fragments deeper than Python's recursion limit is TooDeep (the gate refuses it), not a 500."""
    depth = 3000
    fragments = ["fragment F0 on T { leaf }"]
    fragments += [f"fragment F{i} on T {{ ...F{i - 1} }}" for i in range(1, depth)]
    with pytest.raises(TooDeep):
        query_complexity(" ".join(fragments) + f" {{ root {{ ...F{depth - 1} }} }}")
