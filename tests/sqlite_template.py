"""The migrated (and seeded) SQLite file of the tests that start real processes of the project (gunicorn, Celery,
``python -m config.run``): built once per session, then copied for each test.

``manage.py migrate`` on a new file costs seconds of CPU (Django's start-up, then every migration); a copy of a
file migrated once costs milliseconds. Each test still gets a file of its own, which nothing else writes to.
"""

from __future__ import annotations

import hashlib
import importlib
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from django.conf import global_settings

from tests.session_files import locked

BASE_DIR = Path(__file__).resolve().parents[1]

#: What decides the tables ``migrate`` makes: a settings module that differs in one of these gets a template
#: of its own (the tests' settings modules take the project's apps as they are, so they share one).
SCHEMA_SETTINGS = ("INSTALLED_APPS", "AUTH_USER_MODEL", "MIGRATION_MODULES")


def template_name(env: Mapping[str, str], seeded: bool) -> str:
    """The template's file name for a process environment: its settings module's schema settings, and, seeded,
    the secret key the demo API keys are derived from (demo.seed.demo_key)."""
    module = importlib.import_module(env.get("DJANGO_SETTINGS_MODULE", "config.settings"))
    schema = [repr(getattr(module, name, getattr(global_settings, name))) for name in SCHEMA_SETTINGS]
    if seeded:
        schema.append(env["SECRET_KEY"])
    digest = hashlib.sha256("\n".join(schema).encode()).hexdigest()[:16]
    return f"{'seeded' if seeded else 'migrated'}-{digest}.sqlite3"


def django_command(env: Mapping[str, str], sqlite_path: Path, command: str, **options: object) -> None:
    """``call_command(command, **options)`` in a Django process of ``env``, on the SQLite file ``sqlite_path``."""
    assert "DATABASE_URL" not in env, "the processes of this environment would not use the SQLite file"
    code = "import django; django.setup(); from django.core.management import call_command; "
    code += f"call_command({command!r}, **{options!r})"
    subprocess.run(
        [sys.executable, "-c", code],
        cwd=BASE_DIR,
        env={**env, "SQLITE_PATH": str(sqlite_path), "PYTHONPATH": str(BASE_DIR)},
        check=True,
        capture_output=True,
        timeout=120,
    )


@dataclass(frozen=True)
class SqliteTemplates:
    """The session's templates, in ``directory`` (shared by its xdist workers)."""

    directory: Path

    def template(self, env: Mapping[str, str], seeded: bool) -> Path:
        """The template for ``env``, built by the first process of the session that asks (the others wait for
        it): migrated, then seeded (``seed_demo``) from a copy of the migrated one."""
        path = self.directory / template_name(env, seeded)
        with locked(path):
            if not path.exists():
                partial = path.with_name(f"{path.name}.partial")
                if seeded:
                    shutil.copy(self.template(env, seeded=False), partial)
                    django_command(env, partial, "seed_demo")
                else:
                    partial.unlink(missing_ok=True)
                    django_command(env, partial, "migrate", interactive=False, verbosity=0)
                partial.replace(path)  # whole or not at all: a build that failed leaves no template
        return path

    def copy(self, sqlite_path: Path, env: Mapping[str, str], *, seeded: bool) -> None:
        """Puts at ``sqlite_path`` the database ``migrate`` (then ``seed_demo``, if ``seeded``) leaves for the
        processes of ``env``: a copy of the session's template."""
        shutil.copy(self.template(env, seeded), sqlite_path)
