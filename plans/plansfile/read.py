"""A plans file read into :class:`Node` trees that remember the line of every value, from YAML or JSON.

Errors name a line, so both readers keep it: YAML's through PyYAML's public compose API (each node carries a
``start_mark``), JSON's through a small reader that walks text :func:`json.loads` has already accepted.
"""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass
from typing import Any

#: What ``pip install`` adds for YAML files; JSON needs nothing.
YAML_EXTRA = "PyYAML is not installed: pip install 'django-quota-platform[yaml]', or use JSON (--format json)"


@dataclass(frozen=True)
class Node:
    """One value of the file and the line it starts on (1-based).

    ``value`` is a ``dict[str, Node]``, a ``list[Node]`` or a scalar (str, int, float, bool, None; YAML may
    give a date too); ``text`` is a scalar as written (YAML's ``NO`` is False, its text "NO")."""

    value: Any
    line: int
    text: str = ""


@dataclass(frozen=True)
class Problem:
    """What is wrong at one line: ``where`` is the path of the value (``plans[1].limits[0].rates``), or empty."""

    line: int
    where: str
    message: str

    def render(self, filename: str) -> str:
        """``plans.yaml:14: plans[1].limits[0].rates: <message>`` (no line for what the file does not name)."""
        line = f"{self.line}:" if self.line else ""
        where = f" {self.where}:" if self.where else ""
        return f"{filename}:{line}{where} {self.message}"


class PlansFileError(Exception):
    """The file cannot be applied; ``problems`` says where and why, each with its line."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__(f"{len(problems)} problem(s)")
        self.problems = problems


def read(text: str, file_format: str) -> Node:
    """The file's top node (an empty mapping for an empty file). Raises :class:`PlansFileError` for a syntax
    error or a key given twice in one mapping, and ImportError (with :data:`YAML_EXTRA`) for YAML without PyYAML.
    """
    root = read_json(text) if file_format == "json" else read_yaml(text)
    return root if root is not None else Node({}, 1)


def read_yaml(text: str) -> Node | None:
    try:
        import yaml
    except ImportError as exc:
        raise ImportError(YAML_EXTRA) from exc
    try:
        # compose, not load: the nodes keep their marks, and no tag can construct a Python object.
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        message = exc.problem or exc.context or "unreadable"
        if exc.context and exc.context_mark and exc.problem:  # e.g. "while parsing a flow sequence", and where
            message += f" ({exc.context} from line {exc.context_mark.line + 1})"
        raise PlansFileError([Problem(mark.line + 1 if mark else 1, "", f"not valid YAML: {message}")]) from None
    except yaml.YAMLError as exc:
        raise PlansFileError([Problem(1, "", f"not valid YAML: {exc}")]) from None
    return None if root is None else _yaml_node(root, yaml.constructor.SafeConstructor())


def _yaml_node(node: Any, constructor: Any) -> Node:
    import yaml

    line = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        mapping: dict[str, Node] = {}
        for key, value in node.value:
            if not isinstance(key, yaml.ScalarNode):
                raise PlansFileError([Problem(key.start_mark.line + 1, "", "a key must be a plain word")])
            _no_duplicate(mapping, key.value, key.start_mark.line + 1)
            mapping[key.value] = _yaml_node(value, constructor)
        return Node(mapping, line)
    if isinstance(node, yaml.SequenceNode):
        return Node([_yaml_node(item, constructor) for item in node.value], line)
    return Node(constructor.construct_object(node), line, node.value)


def _no_duplicate(mapping: dict[str, Node], key: str, line: int) -> None:
    # Both parsers would keep the last value silently: a key written twice is a mistake worth naming.
    if key in mapping:
        raise PlansFileError([Problem(line, key, f"given twice (first on line {mapping[key].line})")])


_SPACE = re.compile(r"[ \t\n\r]*")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?")
_LITERALS = {"true": True, "false": False, "null": None}


def read_json(text: str) -> Node | None:
    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not a number")

    try:
        json.loads(text, parse_constant=refuse)
    except json.JSONDecodeError as exc:
        raise PlansFileError([Problem(exc.lineno, "", f"not valid JSON: {exc.msg}")]) from None
    except ValueError as exc:
        raise PlansFileError([Problem(1, "", f"not valid JSON: {exc}")]) from None
    if not text.strip():
        return None
    return _JsonLines(text).value(0)[0]


class _JsonLines:
    """Reads JSON that :func:`json.loads` accepted again, noting the line each value starts on."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.newlines = [i for i, c in enumerate(text) if c == "\n"]

    def line(self, pos: int) -> int:
        return bisect.bisect_left(self.newlines, pos) + 1

    def skip(self, pos: int) -> int:
        match = _SPACE.match(self.text, pos)
        return match.end() if match else pos

    def value(self, pos: int) -> tuple[Node, int]:
        pos = self.skip(pos)
        line, char = self.line(pos), self.text[pos]
        if char == "{":
            return self.mapping(pos + 1, line)
        if char == "[":
            return self.sequence(pos + 1, line)
        if char == '"':
            quoted = _STRING.match(self.text, pos)
            assert quoted is not None  # json.loads accepted the text
            string = json.loads(quoted.group())
            return Node(string, line, string), quoted.end()
        for word, literal in _LITERALS.items():
            if self.text.startswith(word, pos):
                return Node(literal, line, word), pos + len(word)
        match = _NUMBER.match(self.text, pos)
        assert match is not None  # json.loads accepted the text
        written = match.group()
        number = float(written) if match.group(1) or match.group(2) else int(written)
        return Node(number, line, written), match.end()

    def mapping(self, pos: int, line: int) -> tuple[Node, int]:
        found: dict[str, Node] = {}
        pos = self.skip(pos)
        while self.text[pos] != "}":
            key, pos = self.value(pos)
            _no_duplicate(found, key.value, key.line)
            pos = self.skip(pos) + 1  # the colon
            found[key.value], pos = self.value(pos)
            pos = self.skip(pos)
            if self.text[pos] == ",":
                pos = self.skip(pos + 1)
        return Node(found, line), pos + 1

    def sequence(self, pos: int, line: int) -> tuple[Node, int]:
        items: list[Node] = []
        pos = self.skip(pos)
        while self.text[pos] != "]":
            item, pos = self.value(pos)
            items.append(item)
            pos = self.skip(pos)
            if self.text[pos] == ",":
                pos = self.skip(pos + 1)
        return Node(items, line), pos + 1
