"""A clean copy of this checkout, for the tests that build the package from it."""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: What a build must not see: version control, virtualenvs (nox's too), caches and earlier build output (a
#: stale build/ would put moved files back into a wheel).
NOT_COPIED = shutil.ignore_patterns(
    ".git", ".venv", ".nox", "build", "dist", "*.egg-info", "node_modules", "__pycache__", "run", "var",
    "*.sqlite3", ".pytest_cache", ".ruff_cache", ".mypy_cache", "test-artifacts", "bench-results*",
)  # fmt: skip


def copy_checkout(parent: Path) -> Path:
    """This checkout copied into ``parent``/checkout without what :data:`NOT_COPIED` names; the copy's path."""
    return Path(shutil.copytree(ROOT, parent / "checkout", ignore=NOT_COPIED))
