"""The complexity of a GraphQL operation: its selected fields, each counted by its depth.

The formula (docs/graphql.md says the same):

    complexity = sum over every selected field f of depth(f)

where a field of the operation's root selection has depth 1, a field inside
it depth 2, and so on. ``{ books { title author { name } } }`` selects
``books`` (1), ``title`` (2), ``author`` (2) and ``name`` (3): complexity 8.
A deeper field costs more because each level usually resolves a list, one
resolver call per item of the level above.

- **Fragments** are expanded where they are spread: a named fragment's fields
  count at the depth of its spread, once per spread, and an inline fragment's
  at its own depth. Each named fragment is weighed once and its figure reused
  (a fragment spread ten times in ten fragments is not expanded 10**10 times).
- **Introspection**: ``__typename`` is free (no resolver runs); ``__schema``
  and ``__type`` count 1 each, whatever they select, since they read the
  schema held in memory: GraphiQL's introspection query costs 1, not hundreds.
- ``@skip`` and ``@include`` are not evaluated (their variables may come from
  anywhere): a field is counted whether it will run or not.

Only graphql-core's parser is used (both graphene and strawberry are built on
it), and no schema: the figure is the document's, so one function serves every
library. A document that does not parse, or whose operation cannot be chosen,
gets no figure here: the GraphQL library answers it with its own error.
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

#: Introspection fields answered from the schema in memory: 1 each, their selections not counted.
INTROSPECTION_FIELDS = frozenset({"__schema", "__type"})
#: Fields that cost nothing: the type's name, known without a resolver.
FREE_FIELDS = frozenset({"__typename"})


class TooDeep(Exception):
    """The document nests fields or fragments too deeply to be weighed (Python's recursion limit)."""


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


def query_complexity(query: str, operation_name: str | None = None) -> int | None:
    """The complexity of ``query``'s operation ``operation_name`` (see the module docstring), or None when the
    query does not parse or names no single operation (the GraphQL library answers it).

    Raises :class:`TooDeep` for a document too deeply nested to weigh.
    """
    try:
        document = parse(query, no_location=True)
    except (GraphQLError, RecursionError):
        return None
    return document_complexity(document, operation_name)


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
        name = field.name.value
        if name in FREE_FIELDS:
            return _NOTHING
        if name in INTROSPECTION_FIELDS:
            return _ONE
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
