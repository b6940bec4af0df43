"""The layout's rules: apps import only apps below them, nothing imports bench/, modules stay small."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Each reusable app and the apps it may import (the layers, bottom up).
MAY_IMPORT = {
    "quotas": set(),
    "plans": {"quotas"},
    "usage": {"quotas", "plans"},
    "adaptive": {"quotas", "plans"},
    "dashboard": {"quotas", "plans", "usage", "adaptive"},
}
PROJECT = {"config", "demo", "bench", "tests"}
#: A module past this many lines is split into a package (about 400 is the aim).
MAX_LINES = 500


def imported_top_levels(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
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
    """Benchmarks may use the product and the tests' helpers, never the other way round."""
    offenders = [str(p.relative_to(ROOT)) for p in sources("tests") if "bench" in imported_top_levels(p)]
    assert offenders == []


@pytest.mark.parametrize("app", sorted(MAY_IMPORT))
def test_modules_stay_small(app):
    """No module of a reusable app grows past MAX_LINES lines."""
    sizes = {str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines()) for p in sources(app)}
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


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
import quotas.api, quotas.django.decorators, quotas.django.middleware, quotas.middleware, quotas.service
from django.core.checks import run_checks

run_checks()
assert not [m for m in sys.modules if m.startswith("rest_framework")]
"""


def test_the_plain_django_front_doors_and_the_service_need_no_drf():
    """A project without DRF can install quotas and use @quota_limited, PathQuotaMiddleware, QuotaHeadersMiddleware
    and the service: none of them, nor the system checks, imports rest_framework."""
    result = subprocess.run(
        [sys.executable, "-c", NO_DRF_PROBE], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
