"""Files a test session builds once and its pytest-xdist workers share: a lock per file or directory, and the
session's directory for them (pytest-xdist's recipe: the parent of the workers' temporary directories)."""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Held by one process of the session at a time for ``path`` (an exclusive lock on a file beside it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with (path.parent / f"{path.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        yield


def shared(tmp_path_factory: pytest.TempPathFactory, *names: str) -> Path:
    """The session's path ``names``, the same for all its xdist workers (and per session: a new session never
    finds an earlier one's files, pytest gives each its own base directory)."""
    base = tmp_path_factory.getbasetemp()
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base).joinpath(*names)


@contextmanager
def built_once(directory: Path) -> Iterator[Path | None]:
    """Yields ``directory`` to be built (then marked built) by the first worker that asks, None to the others,
    which wait for it under the lock; a failed build leaves it to the next that asks."""
    with locked(directory):
        if (directory / ".built").exists():
            yield None
            return
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
        yield directory
        (directory / ".built").touch()
