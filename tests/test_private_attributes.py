"""Product code uses only the public API of the libraries it builds on: no private attribute (``X._name``) of an
object from Django, DRF, redis-py, hiredis, Celery or prometheus_client, and no private name imported from them.

Which object an expression holds is not known without running the code, so the rule is read off the names: every
module of the product is parsed, every underscore name our own code defines is collected (functions, classes,
module-level and class-level names, attributes it assigns, ``__slots__`` entries, parameters, imports it renames),
and any other ``._name`` read or written (``getattr(x, "_name")`` and ``x.get("_name")`` too) is a private name
of someone else's: a failure naming the file and line. A name in :data:`PUBLIC_ANYWAY` is underscored yet
documented public by its owner.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The product's packages (the apps and the project; bench/ and tests/ are not product code).
PRODUCT = ("quotas", "plans", "usage", "dashboard", "adaptive", "notifications", "console", "config", "demo")
#: The libraries whose private names product code must not touch (import names).
LIBRARIES = frozenset({"django", "rest_framework", "redis", "hiredis", "celery", "kombu", "prometheus_client"})
#: Underscored names their owners document as public.
PUBLIC_ANYWAY = {
    "_meta": "Django's Model._meta API (docs: ref/models/meta)",
    "_exit": "os._exit (the standard library's documented exit of a forked child)",
    "_make": "namedtuple's documented classmethod",
    "_fields": "namedtuple's documented attribute",
    "_replace": "namedtuple's documented method (urllib.parse's results are namedtuples)",
    "_asdict": "namedtuple's documented method",
}
#: Known exceptions, each temporary and owned by another branch: (path, what) -> why it is still here. None now.
KNOWN_EXCEPTIONS: dict[tuple[str, str], str] = {}
#: Calls whose first argument names an attribute (or a key of an object's ``__dict__``).
NAMING_CALLS = frozenset({"getattr", "hasattr", "setattr", "delattr"})
DICT_CALLS = frozenset({"get", "pop", "setdefault"})


def product_modules() -> list[Path]:
    return sorted(path for package in PRODUCT for path in (ROOT / package).rglob("*.py"))


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _target_names(target: ast.expr) -> Iterator[str]:
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, ast.Attribute):
        yield target.attr
    elif isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            yield from _target_names(element)
    elif isinstance(target, ast.Starred):
        yield from _target_names(target.value)


def _bound_by(node: ast.AST) -> Iterator[str]:
    """The names ``node`` itself binds: a definition's, an assignment's targets, a loop's, a ``with``'s, an
    import's, a parameter, ``__slots__`` entries, and setattr()'s constant name."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield node.name
    elif isinstance(node, ast.arg):
        yield node.arg
    elif isinstance(node, ast.alias):
        yield node.asname or node.name.split(".")[0]
    elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        yield from _assigned(node)
    elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension, ast.NamedExpr)):
        yield from _target_names(node.target)
    elif isinstance(node, (ast.With, ast.AsyncWith)):
        for item in node.items:
            if item.optional_vars is not None:
                yield from _target_names(item.optional_vars)
    elif isinstance(node, ast.Call) and _called_name(node) == "setattr" and len(node.args) > 1:
        yield from _constant_name(node.args[1])


def _assigned(node: ast.Assign | ast.AnnAssign | ast.AugAssign) -> Iterator[str]:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    for target in targets:
        yield from _target_names(target)
    if any(isinstance(t, ast.Name) and t.id == "__slots__" for t in targets) and node.value is not None:
        yield from (c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant))


def defined_names(tree: ast.AST) -> set[str]:
    """Every name ``tree`` defines (private or not; the caller keeps the private ones)."""
    return {name for node in ast.walk(tree) for name in _bound_by(node) if isinstance(name, str)}


def _constant_name(node: ast.expr) -> Iterator[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
        yield node.value


def _called_name(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


def _library(module: str | None) -> bool:
    return module is not None and module.split(".")[0] in LIBRARIES


def _private_import(node: ast.AST) -> Iterator[str]:
    """What ``node`` imports of a library's private names (or from its private modules)."""
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None and _library(node.module):
        if any(is_private(part) for part in node.module.split(".")):
            yield f"from {node.module} import ..."
        yield from (f"from {node.module} import {a.name}" for a in node.names if is_private(a.name))
    elif isinstance(node, ast.Import):
        for alias in node.names:
            if _library(alias.name) and any(is_private(part) for part in alias.name.split(".")):
                yield f"import {alias.name}"


def _private_name_use(node: ast.AST, ours: set[str]) -> Iterator[str]:
    """``node``'s use of a private name ``ours`` lacks: ``x._name`` (but on self or cls), ``getattr(x, "_name")``
    and its kin, ``x.get("_name")`` (a ``__dict__`` read by another name)."""
    if isinstance(node, ast.Attribute) and is_private(node.attr) and node.attr not in ours:
        if not (isinstance(node.value, ast.Name) and node.value.id in {"self", "cls"}):
            yield f"._{node.attr.lstrip('_')}"
    elif isinstance(node, ast.Call) and node.args:
        called = _called_name(node)
        index = 1 if called in NAMING_CALLS else 0 if called in DICT_CALLS else None
        if index is not None and len(node.args) > index:
            for name in _constant_name(node.args[index]):
                if is_private(name) and name not in ours:
                    yield f'{called}(..., "{name}")'


def private_uses(tree: ast.AST, ours: set[str]) -> Iterator[tuple[int, str]]:
    """(line, what) for every private name of another's that ``tree`` touches or imports."""
    for node in ast.walk(tree):
        for what in (*_private_name_use(node, ours), *_private_import(node)):
            yield getattr(node, "lineno", 0), what


def offences() -> list[str]:
    trees = {path: ast.parse(path.read_text(encoding="utf-8"), str(path)) for path in product_modules()}
    ours = {name for tree in trees.values() for name in defined_names(tree) if is_private(name)}
    ours |= set(PUBLIC_ANYWAY)
    found = []
    for path, tree in trees.items():
        where = str(path.relative_to(ROOT))
        for line, what in private_uses(tree, ours):
            if (where, what) not in KNOWN_EXCEPTIONS:
                found.append(f"{where}:{line}: {what}")
    return sorted(found)


def test_product_code_touches_no_private_attribute_of_its_libraries():
    """No module of the product reads, writes or imports a private name its own code does not define."""
    assert offences() == []


def test_the_scan_finds_what_it_looks_for():
    """A private attribute of another's, a private import from a library and a getattr() of a private name are
    each found; our own private names and documented ones are not."""
    source = (
        "from redis._parsers.hiredis import _HiredisParser\n"
        "from django.db import _helper\n"
        "import redis._parsers\n"
        "class Ours:\n"
        "    def run(self, response, request):\n"
        "        self._mine = response.headers._store\n"
        "        self._mine.update(request.__dict__.get('_request'))\n"
        "        return getattr(request, '_request', request), self._mine, request._meta, Ours._private\n"
        "    _private = 1\n"
    )
    tree = ast.parse(source)
    ours = {name for name in defined_names(tree) if is_private(name)} | set(PUBLIC_ANYWAY)
    assert sorted(what for _line, what in private_uses(tree, ours)) == sorted(
        [
            "from redis._parsers.hiredis import ...",
            "from redis._parsers.hiredis import _HiredisParser",
            "from django.db import _helper",
            "import redis._parsers",
            "._store",
            'get(..., "_request")',
            'getattr(..., "_request")',
        ]
    )
