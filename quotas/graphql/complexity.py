"""The complexity of a GraphQL operation: its selected fields, each counted by its depth.

The formula (docs/graphql.md says the same):

    complexity = sum over every selected field f of depth(f)

where a field of the operation's root selection has depth 1, a field inside
it depth 2, and so on. ``{ books { title author { name } } }`` selects
``books`` (1), ``title`` (2), ``author`` (2) and ``name`` (3): complexity 8.
A deeper field costs more because each level usually resolves a list, one
resolver call per item of the level above.

- **Every selected field counts**, ``__typename`` and introspection
  (``__schema``, ``__type`` and what they select) included: no resolver of
  ours may run for them, but the library still validates, plans and answers
  each one, and graphql-core's validation of repeated fields is quadratic
  (a thousand free ``__typename`` cost seconds of CPU for one unit).
- **Fragments** are expanded where they are spread: a named fragment's fields
  count at the depth of its spread, once per spread, and an inline fragment's
  at its own depth. Each named fragment is weighed once and its figure reused
  (a fragment spread ten times in ten fragments is not expanded 10**10 times).
- ``@skip`` and ``@include`` are not evaluated (their variables may come from
  anywhere): a field is counted whether it will run or not.

Only graphql-core's parser is used (both graphene and strawberry are built on
it), and no schema: the figure is the document's, so one function serves every
library. The parse is bounded by ``max_tokens`` (graphql-core stops lexing
past it): the caller bounds the document's length first. A document that does
not parse, or whose operation cannot be chosen, gets no figure here: the
GraphQL library answers it with its own error.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from graphql import GraphQLError, parse
from graphql.language import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    InlineFragmentNode,
    OperationDefinitionNode,
    SelectionSetNode,
)


class TooDeep(Exception):
    """The document nests fields or fragments too deeply to be weighed (Python's recursion limit)."""


class TooManyTokens(Exception):
    """The document has more tokens than the parse was allowed (``max_tokens``): parsing stopped there."""

    def __init__(self, max_tokens: int) -> None:
        super().__init__(f"the document has more than {max_tokens} tokens")
        self.max_tokens = max_tokens


@dataclass(frozen=True, slots=True)
class _Weight:
    """A selection set's weight as a function of the depth ``d`` of its own fields: ``fields * d + extra``."""

    fields: int = 0
    extra: int = 0

    def __add__(self, other: _Weight) -> _Weight:
        return _Weight(self.fields + other.fields, self.extra + other.extra)

    def nested(self) -> _Weight:
        """This weight one level down: its fields count one more each."""
        return _Weight(self.fields, self.fields + self.extra)


_NOTHING = _Weight()
_ONE = _Weight(1, 0)


def query_complexity(query: str, operation_name: str | None = None, max_tokens: int | None = None) -> int | None:
    """The complexity of ``query``'s operation ``operation_name`` (see the module docstring), or None when the
    query does not parse or names no single operation (the GraphQL library answers it).

    Raises :class:`TooManyTokens` when ``query`` has more than ``max_tokens`` tokens, :class:`TooDeep` for a
    document too deeply nested to weigh.
    """
    document = parse_query(query, max_tokens)
    return None if document is None else document_complexity(document, operation_name)


def parse_query(query: str, max_tokens: int | None = None) -> DocumentNode | None:
    """``query`` parsed (without locations), or None when it does not parse (the GraphQL library answers it).

    Raises :class:`TooManyTokens` when it has more than ``max_tokens`` tokens, comments included: the parse
    stops at the first one too many. graphql-core 3.2.14 deprecates ``max_tokens`` for ``max_lexical_tokens``
    and ``max_comments``, which earlier releases lack; ``max_tokens`` is one bound on both, and older.
    """
    try:
        return parse(query, no_location=True, max_tokens=max_tokens)
    except GraphQLError as exc:
        # graphql-core says so only in its message ("Document contains more than N tokens. Parsing aborted.");
        # test_complexity.py pins it, so a change of wording fails there, not in production.
        if max_tokens is not None and exc.message.endswith(f"more than {max_tokens} tokens. Parsing aborted."):
            raise TooManyTokens(max_tokens) from exc
        return None
    except RecursionError:
        return None


def document_complexity(document: DocumentNode, operation_name: str | None = None) -> int | None:
    """The complexity of ``document``'s operation ``operation_name`` (the only one when None), or None when
    there is no such single operation.

    Raises :class:`TooDeep` for a document too deeply nested to weigh.
    """
    operation = _operation(document.definitions, operation_name)
    if operation is None:
        return None
    fragments = {d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)}
    try:
        weight = _Weigher(fragments).selection_set(operation.selection_set)
    except RecursionError as exc:
        raise TooDeep("the document nests fields or fragments too deeply to weigh") from exc
    return weight.fields + weight.extra  # its root fields are at depth 1


def _operation(definitions: Sequence[object], name: str | None) -> OperationDefinitionNode | None:
    """The operation a request names (or its only one), as GraphQL's executor picks it; None if none fits."""
    operations = [d for d in definitions if isinstance(d, OperationDefinitionNode)]
    if name is None:
        return operations[0] if len(operations) == 1 else None
    named = [o for o in operations if o.name is not None and o.name.value == name]
    return named[0] if len(named) == 1 else None


class _Weigher:
    """Weighs the selection sets of one document, each named fragment once."""

    def __init__(self, fragments: dict[str, FragmentDefinitionNode]) -> None:
        self.fragments = fragments
        self.weighed: dict[str, _Weight] = {}
        self.weighing: set[str] = set()

    def selection_set(self, selections: SelectionSetNode | None) -> _Weight:
        """The weight of ``selections``, as a function of the depth of their own fields."""
        total = _NOTHING
        for selection in selections.selections if selections is not None else ():
            if isinstance(selection, FieldNode):
                total += self.field(selection)
            elif isinstance(selection, InlineFragmentNode):
                total += self.selection_set(selection.selection_set)
            elif isinstance(selection, FragmentSpreadNode):
                total += self.fragment(selection.name.value)
        return total

    def field(self, field: FieldNode) -> _Weight:
        """One field and what it selects."""
        return _ONE + self.selection_set(field.selection_set).nested()

    def fragment(self, name: str) -> _Weight:
        """A named fragment's weight, worked out once. An unknown fragment, or one spread inside itself, weighs
        nothing: GraphQL's validation refuses the document anyway, before anything runs."""
        known = self.weighed.get(name)
        if known is not None:
            return known
        definition = self.fragments.get(name)
        if definition is None or name in self.weighing:
            return _NOTHING
        self.weighing.add(name)
        weight = self.weighed[name] = self.selection_set(definition.selection_set)
        self.weighing.discard(name)
        return weight
