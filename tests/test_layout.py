"""The layout's rules: apps import only apps below them, the layers inside ``quotas`` hold, no app's modules (nor
its packages) import one another in a cycle, nothing imports bench/, modules stay small."""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Each reusable app and the apps it may import (the layers, bottom up).
MAY_IMPORT = {
    "quotas": set(),
    "plans": {"quotas"},
    "usage": {"quotas", "plans"},
    "adaptive": {"quotas", "plans"},
    "notifications": {"quotas", "plans"},
    "console": {"quotas", "plans", "notifications"},
    "dashboard": {"quotas", "plans", "usage", "adaptive", "notifications", "console"},
}
PROJECT = {"config", "demo", "bench", "tests"}
#: No product module is longer than this: a longer one is split by job, each part named for what it holds.
MAX_LINES = 400
#: The product: the reusable apps and the project around them (their migrations are generated, and excluded).
PRODUCT = (*MAY_IMPORT, "config", "demo")
#: Modules allowed past MAX_LINES for now, each with the branch that brings it under.
TOO_LONG_FOR_NOW: set[str] = set()


@functools.cache
def parse(source: str) -> ast.Module:
    """``source``'s syntax tree, parsed once per process: the tests here walk the same files again and again
    (each product module a dozen times), and parsing is most of their time. The trees are only read."""
    return ast.parse(source)


def imported_top_levels(path: Path) -> set[str]:
    tree = parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def sources(folder: str) -> list[Path]:
    return [p for p in (ROOT / folder).rglob("*.py") if "migrations" not in p.parts]


@pytest.mark.parametrize("app", sorted(MAY_IMPORT))
def test_an_app_imports_only_the_apps_below_it(app):
    """quotas imports no other app; plans only quotas; ...; none imports the demo project or bench/."""
    forbidden = (set(MAY_IMPORT) | PROJECT) - MAY_IMPORT[app] - {app}
    offenders = {
        str(path.relative_to(ROOT)): sorted(imported_top_levels(path) & forbidden)
        for path in sources(app)
        if imported_top_levels(path) & forbidden
    }
    assert offenders == {}


def test_tests_import_nothing_from_bench():
    """Benchmarks may use the product and the tests' helpers, never the other way round; only the bench's own
    tests (tests/bench/, its arithmetic) import it."""
    own_tests = ROOT / "tests" / "bench"
    offenders = [
        str(p.relative_to(ROOT))
        for p in sources("tests")
        if "bench" in imported_top_levels(p) and own_tests not in p.parents
    ]
    assert offenders == []


@pytest.mark.parametrize("app", sorted(PRODUCT))
def test_modules_stay_small(app):
    """No product module (a reusable app's, config's or the demo's) grows past MAX_LINES lines."""
    sizes = {str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines()) for p in sources(app)}
    assert {name: n for name, n in sizes.items() if n > MAX_LINES and name not in TOO_LONG_FOR_NOW} == {}


#: The layers inside ``quotas``, bottom up, by unit: a package (``quotas.store``) or a top-level module
#: (``quotas.checks``), never a module inside a package. A module may import modules of its own layer or of a
#: layer below, never above: at the top of the file, inside a function (a deferred import) or for type checking
#: alike. A unit belongs to the layer naming it; any other is a front door.
QUOTAS_LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # Settings, errors and signals; the clock every part reads the time from; the locks a forked child makes
    # anew; the metrics registry; the formats
    # every layer reads (rates, money, periods, allow and deny lists); what the engine and its store share (the
    # Python/Lua protocol, the key layout, the Lua library, a REDIS_URL's parsing); the SSRF guard of requests to
    # URLs operators enter.
    (
        "foundations",
        (
            "quotas.exceptions",
            "quotas.signals",
            "quotas.clock",
            "quotas.fork_safe",
            "quotas.settings",
            "quotas.metrics",
            "quotas.metrics_fold",
            "quotas.metrics_exposition",
            "quotas.formats",
            "quotas.contract",
            "quotas.outbound",
        ),
    ),
    ("rules", ("quotas.rules",)),  # the snapshot of plans, limits and keys: data, no I/O
    ("store", ("quotas.store",)),  # the transport, the store that encodes and sends, the guard around it
    ("problems", ("quotas.problems",)),  # the body of every refusal
    ("observability", ("quotas.observability",)),  # history, last refusals, audit records, alert and ban signals
    # This process: the live rules, the poller, the notes; the engine that holds them and the front doors' memos.
    ("runtime", ("quotas.runtime", "quotas.engine")),
    ("identity", ("quotas.identity",)),  # who is calling; failed authentications
    ("service", ("quotas.decide", "quotas.standing")),  # one decision, whatever the front door
    ("front doors", ("quotas",)),  # DRF, plain Django, HTTP views and middleware, admin, checks, commands, quotas.api
)


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_of(path: Path, root: Path = ROOT) -> str:
    """The package a relative import in ``path`` starts from: the module itself for an ``__init__.py``."""
    name = module_name(path, root)
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def imported_modules(node: ast.ImportFrom, package: str) -> list[str]:
    """What ``from ... import a, b`` may name, as dotted paths, relative ones resolved against ``package``.

    ``from a.b import c`` imports the module a.b.c when c is a module, else a name of a.b; ``from . import x``
    in package p imports p.x; ``from ..m import y`` in p.q imports p.m.y (or a name of p.m). A relative import
    with no package to start from (or that climbs above it) names nothing here.
    """
    if node.level == 0:
        base = node.module or ""
    else:
        parts = package.split(".") if package else []
        if not parts or node.level - 1 >= len(parts):
            return []
        base = ".".join(parts[: len(parts) - (node.level - 1)] + ([node.module] if node.module else []))
    return [f"{base}.{alias.name}" for alias in node.names]


def imports_of(source: str, known: set[str], package: str = "") -> Iterator[tuple[str, int]]:
    """Every module of ``known`` that ``source`` imports, with the line: wherever the import statement is.

    ``package`` is the source's own package, against which its relative imports resolve."""
    for node in ast.walk(parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = imported_modules(node, package)
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name:
                yield name, node.lineno


def import_graph(paths: list[Path], root: Path = ROOT) -> dict[str, dict[str, int]]:
    """For each module, the modules of ``paths`` it imports (first line of each), absolute or relative."""
    modules = {module_name(p, root): p for p in paths}
    graph: dict[str, dict[str, int]] = {}
    for name, path in modules.items():
        edges: dict[str, int] = {}
        for target, line in imports_of(path.read_text(encoding="utf-8"), set(modules), package_of(path, root)):
            if target != name:
                edges.setdefault(target, line)
        graph[name] = edges
    return graph


def reachable(graph: dict[str, dict[str, int]], start: str) -> set[str]:
    """Every module an import chain from ``start`` reaches."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for target in graph.get(todo.pop(), {}):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Each group of modules that import one another, directly or through others (a module reaching itself)."""
    reach = {name: reachable(graph, name) for name in graph}
    groups = {
        frozenset({name} | {other for other in reach[name] if name in reach.get(other, set())})
        for name in graph
        if name in reach[name]
    }
    return sorted(sorted(group) for group in groups)


#: Every app whose imports form no cycle: the reusable apps and the project around them.
CYCLE_FREE = sorted(set(MAY_IMPORT) | {"config", "demo"})


#: The subpackages of each app (a module ``app.X`` that is a package is its own unit).
PACKAGES = {f"{app}.{p.name}" for app in CYCLE_FREE for p in (ROOT / app).iterdir() if (p / "__init__.py").exists()}


def unit_of(module: str, packages: set[str] = PACKAGES) -> str:
    """The package a module belongs to (``quotas.store.guard`` -> ``quotas.store``), or the top-level module."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 or module in packages else module


def layer_of(module: str) -> int:
    """The layer of ``module``'s unit (the last, the front doors, for a unit no layer names)."""
    unit = unit_of(module)
    for number, (_, units) in enumerate(QUOTAS_LAYERS):
        if unit in units:
            return number
    return len(QUOTAS_LAYERS) - 1


def test_the_layers_name_units_only():
    """No per-module exception: every layer names packages and top-level modules, never a module inside a
    package."""
    named = [unit for _, units in QUOTAS_LAYERS for unit in units]
    assert [u for u in named if u != "quotas" and unit_of(u) != u] == []
    assert [u for u in named if u.count(".") > 1] == []


def unit_graph(graph: dict[str, dict[str, int]], packages: set[str] = PACKAGES) -> dict[str, dict[str, int]]:
    """The module graph folded into units: an edge between two units for each import from one into the other."""
    units: dict[str, dict[str, int]] = {}
    for module, edges in graph.items():
        source = unit_of(module, packages)
        for target, line in edges.items():
            if unit_of(target, packages) != source:
                units.setdefault(source, {}).setdefault(unit_of(target, packages), line)
    return units


@pytest.mark.parametrize("app", CYCLE_FREE)
def test_the_units_of_an_app_import_no_cycle(app):
    """No chain of imports between an app's packages (and top-level modules) leads back to where it started:
    plans.models does not import plans.feeds while plans.feeds imports plans.models."""
    assert cycles(unit_graph(import_graph(sources(app)))) == []


@pytest.mark.parametrize("app", CYCLE_FREE)
def test_an_app_has_no_import_cycle(app):
    """No chain of imports inside an app leads back to where it started, deferred and relative imports
    included."""
    assert cycles(import_graph(sources(app))) == []


def _package(root: Path, files: dict[str, str]) -> list[Path]:
    """Writes ``files`` (path under ``root``: source) and returns their paths, sorted."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return sorted(root / name for name in files)


def test_the_cycle_check_sees_an_import_deferred_into_a_function(tmp_path):
    """A cycle hidden by a deferred import (or one for type checking only) is still a cycle."""
    paths = _package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from pkg.b import thing\n",
            "pkg/b.py": "def thing():\n    from pkg import a\n    return a\n",
            "pkg/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import x\n",
        },
    )
    graph = import_graph(paths, tmp_path)
    assert cycles(graph) == [["pkg.a", "pkg.b"]]
    assert "pkg.a" in graph["pkg.c"]


def test_the_cycle_check_follows_relative_imports(tmp_path):
    """``from . import x``, ``from .x import y`` and ``from ..m import z`` are edges like absolute imports, so a
    cycle written with them is seen, between modules and between the units holding them."""
    paths = _package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from . import b\n",
            "pkg/b.py": "def later():\n    from .a import thing\n",
            "pkg/models/__init__.py": "from .feed import Feed\n",
            "pkg/models/feed.py": "from ..feeds.source import check\n",
            "pkg/feeds/__init__.py": "",
            "pkg/feeds/source.py": "",
            "pkg/feeds/refresh.py": "from ..models import Feed\n",
        },
    )
    graph = import_graph(paths, tmp_path)
    assert graph["pkg.models.feed"] == {"pkg.feeds.source": 1}
    assert graph["pkg.feeds.refresh"] == {"pkg.models": 1}
    assert cycles(graph) == [["pkg.a", "pkg.b"]]
    assert cycles(unit_graph(graph, {"pkg.models", "pkg.feeds"})) == [["pkg.a", "pkg.b"], ["pkg.feeds", "pkg.models"]]


def test_every_quotas_module_has_a_layer():
    """A new subpackage is placed in QUOTAS_LAYERS on purpose, not by the catch-all of the front doors."""
    catch_all = len(QUOTAS_LAYERS) - 1
    top_level = {"quotas.api", "quotas.internal_api", "quotas.apps", "quotas.admin", "quotas.checks",
                 "quotas.middleware", "quotas.openapi", "quotas.testing", "quotas.throttling", "quotas.gunicorn",
                 "quotas.startup", "quotas"}  # fmt: skip
    front_door_packages = (
        "quotas.http",
        "quotas.drf",
        "quotas.django",
        "quotas.graphql",
        "quotas.management",
        "quotas.checks",
    )
    unplaced = [
        name
        for name in import_graph(sources("quotas"))
        if layer_of(name) == catch_all and name not in top_level and not name.startswith(front_door_packages)
    ]
    assert unplaced == []


def test_quotas_modules_import_only_their_layer_and_those_below():
    """identity does not import the front doors, the store does not import the runtime, and so on up."""
    graph = import_graph(sources("quotas"))
    upward = [
        f"{module} ({QUOTAS_LAYERS[layer_of(module)][0]}) imports {target} "
        f"({QUOTAS_LAYERS[layer_of(target)][0]}) at line {line}"
        for module, edges in sorted(graph.items())
        for target, line in edges.items()
        if layer_of(target) > layer_of(module)
    ]
    assert upward == []


#: What the other apps may import of quotas: its public API (quotas.api), what is theirs alone (quotas.internal_api)
#: and the contracts that have a module of their own (settings and their checks, errors, signals, problem bodies,
#: the rules a backend builds and the formats they use, the DRF adapter, the metrics registry and its exposition,
#: the history's format, the SSRF guard of webhooks and feeds). Never the store, the runtime or identity.
QUOTAS_PUBLIC = (
    "quotas.api", "quotas.internal_api", "quotas.settings",
    "quotas.checks",
    "quotas.exceptions", "quotas.signals", "quotas.problems", "quotas.rules", "quotas.formats", "quotas.drf",
    "quotas.openapi", "quotas.throttling", "quotas.middleware", "quotas.metrics", "quotas.metrics_exposition",
    "quotas.observability.history",
    "quotas.outbound",
)  # fmt: skip


@pytest.mark.parametrize("app", sorted(set(MAY_IMPORT) - {"quotas"}))
def test_other_apps_use_only_the_public_parts_of_quotas(app):
    """plans, usage, adaptive and dashboard reach quotas through quotas.api and its contracts, deferred imports
    included."""
    known = {module_name(p) for p in sources("quotas")} | {"quotas"}
    offenders = sorted(
        f"{path.relative_to(ROOT)}:{line} imports {target}"
        for path in sources(app)
        for target, line in imports_of(path.read_text(encoding="utf-8"), known)
        if not any(target == public or target.startswith(public + ".") for public in QUOTAS_PUBLIC)
    )
    assert offenders == []


#: What no other app may take from quotas: the runtime. (The adaptive controller's own keys go through the store's
#: ControllerBoard, quotas.internal_api.controller_board, which hands out no client.)
HANDS_OUT_REDIS = {"quotas.internal_api": {"default_engine", "get_runtime"}}


def imported_names(source: str) -> Iterator[tuple[str, str, int]]:
    """(module, name, line) of every ``from module import name`` in ``source``, wherever it is."""
    for node in ast.walk(parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield from ((node.module, alias.name, node.lineno) for alias in node.names)


@pytest.mark.parametrize("app", sorted(set(MAY_IMPORT) - {"quotas"}))
def test_other_apps_hold_no_runtime_store_or_redis_client(app):
    """plans, usage, adaptive and dashboard read what the engine keeps in Redis through quotas.internal_api's specific
    calls (BackOffice, the controller's board): none imports redis, the runtime, or a history reader that takes a
    client."""
    offenders = []
    for path in sources(app):
        source = path.read_text(encoding="utf-8")
        where = path.relative_to(ROOT)
        if "redis" in imported_top_levels(path):
            offenders.append(f"{where} imports redis")
        for module, name, line in imported_names(source):
            if name in HANDS_OUT_REDIS.get(module, set()):
                offenders.append(f"{where}:{line} imports {module}.{name}")
            if module == "quotas.observability.history" and name.startswith("read_"):
                offenders.append(f"{where}:{line} imports {module}.{name} (it takes a Redis client)")
    assert offenders == []


NO_DRF_PROBE = """
import sys

class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "rest_framework" or name.startswith("rest_framework."):
            raise ImportError(f"DRF is not installed here: {name}")

sys.meta_path.insert(0, Block())
import django
from django.conf import settings

settings.configure(
    SECRET_KEY="layout-probe", INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "quotas"],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
)
django.setup()
import quotas.api, quotas.django.decorators, quotas.django.middleware, quotas.middleware, quotas.decide
from django.core.checks import run_checks

run_checks()
assert not [m for m in sys.modules if m.startswith("rest_framework")]
"""


@pytest.mark.slow  # a real Python process
def test_the_plain_django_front_doors_and_the_service_need_no_drf():
    """A project without DRF can install quotas and use @quota_limited, PathQuotaMiddleware, QuotaHeadersMiddleware
    and the service: none of them, nor the system checks, imports rest_framework."""
    result = subprocess.run(
        [sys.executable, "-c", NO_DRF_PROBE], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]


#: The engine's modules that talk to Redis themselves, besides redis-py: the transport, the clients made from a
#: URL and the memory store. Only the store (and what it stands on) imports them; everything above asks the store.
REDIS_TALKERS = ("quotas.store.transport", "quotas.store.backends.connect", "quotas.store.backends.memory")
#: The layers at or below the store, whose modules may import REDIS_TALKERS.
AT_OR_BELOW_STORE = {name for name, _ in QUOTAS_LAYERS[: [n for n, _ in QUOTAS_LAYERS].index("store") + 1]}


def test_nothing_above_the_store_talks_to_redis():
    """The store owns every Redis call: no module above quotas/store/ (nor any other app) imports redis-py, the
    transport, the clients or the memory store, at the top of the file, deferred or for type checking alike."""
    known = {module_name(p) for app in MAY_IMPORT for p in sources(app)}
    offenders = []
    for app in sorted(MAY_IMPORT):
        for path in sources(app):
            module = module_name(path)
            if app == "quotas" and QUOTAS_LAYERS[layer_of(module)][0] in AT_OR_BELOW_STORE:
                continue
            source = path.read_text(encoding="utf-8")
            if "redis" in imported_top_levels(path):
                offenders.append(f"{path.relative_to(ROOT)} imports redis")
            for target, line in imports_of(source, known, package_of(path)):
                if target.startswith(REDIS_TALKERS):
                    offenders.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert offenders == []


def test_nothing_below_the_store_imports_redis():
    """The foundations and the rules are text, numbers and data: a REDIS_URL's grammar is a format
    (quotas.formats.store_urls) and what redis-py alone reads of one is checked by the store's backend, so no
    module below the store imports redis-py, the layer that owns every call to it."""
    below = {name for name, _ in QUOTAS_LAYERS[: [n for n, _ in QUOTAS_LAYERS].index("store")]}
    offenders = [
        str(path.relative_to(ROOT))
        for path in sources("quotas")
        if QUOTAS_LAYERS[layer_of(module_name(path))][0] in below and "redis" in imported_top_levels(path)
    ]
    assert offenders == []


def test_the_store_hands_out_no_redis_client():
    """Neither the Store protocol nor RedisStore has a ``redis`` attribute: callers use the store's parts."""
    from quotas.store.interface import Store
    from quotas.store.redis_store import RedisStore

    assert not [cls.__name__ for cls in (Store, RedisStore) if "redis" in dir(cls) or "redis" in cls.__annotations__]


def reads_of_a_transport_client(source: str) -> list[int]:
    """The lines of ``source`` that read ``<something>.transport.client`` (or a script's ``.client``) or name
    ``transport.client`` in a ``getattr``."""
    lines = []
    for node in ast.walk(parse(source)):
        if isinstance(node, ast.Attribute) and node.attr == "client":
            owner = node.value
            named = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
            called = owner.func.attr if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Attribute) else ""
            if named == "transport" or called in {"script", "async_script"}:
                lines.append(node.lineno)
    return lines


def test_nothing_reads_the_client_of_the_stores_transport():
    """The raw client under the store stays in the store: no product module, test or benchmark reads it from the
    store's transport or its scripts (the store is given it where both are opened; a test opens its own,
    tests/store_client.py). Only the transport itself holds it."""
    offenders = [
        f"{path.relative_to(ROOT)}:{line}"
        for folder in (*PRODUCT, "tests", "bench")
        for path in sources(folder)
        if path != ROOT / "quotas" / "store" / "transport.py"
        for line in reads_of_a_transport_client(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []


@pytest.mark.django_db
def test_the_runtime_reaches_no_redis_client_through_public_attributes(runtime):
    """From the runtime down, public attributes two steps deep (``runtime.store.transport.client`` and the like)
    lead to no Redis client: the store and its transport send on one they do not hand out."""
    from redis import Redis
    from redis.cluster import RedisCluster

    from quotas.store.backends.memory import MemoryRedis

    def public(obj: object) -> list[tuple[str, object]]:
        return [(name, getattr(obj, name, None)) for name in dir(obj) if not name.startswith("_")]

    found = [
        f"runtime.store.{name}.{inner}"
        for name, part in public(runtime.store)
        if not callable(part)
        for inner, value in public(part)
        if isinstance(value, Redis | RedisCluster | MemoryRedis)
    ]
    found += [
        f"runtime.store.{name}"
        for name, value in public(runtime.store)
        if isinstance(value, Redis | RedisCluster | MemoryRedis)
    ]
    assert found == []
