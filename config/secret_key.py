"""The project's SECRET_KEY when the environment gives none: generated once, kept in the run directory.

``make run`` (and ``python -m config.secret_key``) writes a random key to
``$RUN_DIR/secret_key`` (mode 0600, ``run/`` is git-ignored) the first time;
every later command in that checkout (``manage.py``, gunicorn, Celery, a
second ``make run``) reads the same file, so sessions, signed links and the
demo keys stay valid. A deployment sets ``SECRET_KEY`` instead; with neither,
and DEBUG off, the settings refuse to load (see :func:`secret_key`).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

FILE_NAME = "secret_key"
BASE_DIR = Path(__file__).resolve().parent.parent


def run_dir() -> Path:
    """This checkout's run directory: ``$RUN_DIR``, else ``run/`` (settings, ``config.run`` and this module agree)."""
    return Path(os.environ.get("RUN_DIR") or BASE_DIR / "run").resolve()


def key_file(run_dir: Path) -> Path:
    """Where the generated key of ``run_dir`` lives."""
    return run_dir / FILE_NAME


def read_key(run_dir: Path) -> str:
    """The generated key of ``run_dir``, or "" if there is none."""
    try:
        return key_file(run_dir).read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return ""


def ensure_key(run_dir: Path) -> str:
    """The generated key of ``run_dir``, creating it (0600) if missing; safe when two processes race."""
    existing = read_key(run_dir)
    if existing:
        return existing
    run_dir.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(key_file(run_dir), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return read_key(run_dir)  # another process wrote it first
    with os.fdopen(fd, "w", encoding="ascii") as out:
        out.write(secrets.token_urlsafe(50) + "\n")
    return read_key(run_dir)


if __name__ == "__main__":
    # `make run`'s first step, before `manage.py migrate`: a key in the environment needs no file.
    if not os.environ.get("SECRET_KEY"):
        ensure_key(run_dir())
