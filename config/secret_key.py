"""The project's SECRET_KEY when the environment gives none: generated once, kept in the run directory.

``make run`` (and ``python -m config.secret_key``) writes a random key to
``$RUN_DIR/secret_key`` (mode 0600, ``run/`` is git-ignored) the first time;
every later command in that checkout (``manage.py``, gunicorn, Celery, a
second ``make run``) reads the same file, so sessions, signed links and the
demo keys stay valid. A deployment sets ``SECRET_KEY`` instead; with neither,
and DEBUG off, the settings refuse to load (see config/settings.py).

The file is trusted only when it is this user's own and private, the rule the
usage spool applies to its directory (quotas/store/usage_batches.py): owned by
the user running the process, no permission bits for group or others. Anyone
who could read it could forge sessions and signed links; anyone who could
write it could choose the key. A file that fails the rule, or is empty, stops
the settings from loading with a message naming the file and the fix.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import tempfile
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

FILE_NAME = "secret_key"
BASE_DIR = Path(__file__).resolve().parent.parent


def run_dir() -> Path:
    """This checkout's run directory: ``$RUN_DIR``, else ``run/`` (settings, ``config.run`` and this module agree)."""
    return Path(os.environ.get("RUN_DIR") or BASE_DIR / "run").resolve()


def key_file(run_dir: Path) -> Path:
    """Where the generated key of ``run_dir`` lives."""
    return run_dir / FILE_NAME


def read_key(run_dir: Path) -> str:
    """The generated key of ``run_dir``, or "" if there is none.

    Raises ImproperlyConfigured, naming the file and the fix, when the file is
    not this user's private regular file, or is empty.
    """
    path = key_file(run_dir)
    try:
        # O_NOFOLLOW: a symbolic link is not the private file it points to; O_NONBLOCK: a FIFO cannot hang us.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return ""
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _refused(path, "is a symbolic link", _REPLACE) from None
        raise
    with os.fdopen(fd, "rb") as source:
        _check_private(os.fstat(source.fileno()), path)  # the file opened, whatever the path names by now
        key = source.read().decode("ascii", errors="replace").strip()
    if not key:
        fix = "delete it and run `make run` (or `python -m config.secret_key`) to write a new one"
        raise _refused(path, "is empty", fix)
    return key


#: The fix for a key file that is not a regular file at all.
_REPLACE = "replace it with a regular file of this user's with mode 0600 (or delete it to have `make run` generate one)"


def _check_private(info: os.stat_result, path: Path) -> None:
    """Raise ImproperlyConfigured unless ``info`` is a regular file owned by this user, closed to group and others."""
    uid = os.getuid()
    if not stat.S_ISREG(info.st_mode):
        raise _refused(path, "is not a regular file", _REPLACE)
    if info.st_uid != uid:
        raise _refused(path, f"belongs to uid {info.st_uid}, not to this user (uid {uid})", f"run `chown {uid} {path}`")
    if info.st_mode & 0o077:
        mode = stat.S_IMODE(info.st_mode)
        raise _refused(path, f"is open to group or others (mode {mode:04o})", f"run `chmod 600 {path}`")


def _refused(path: Path, problem: str, fix: str) -> ImproperlyConfigured:
    return ImproperlyConfigured(
        f"The secret key file {path} {problem}: {fix}, or set the SECRET_KEY environment variable instead."
    )


def ensure_key(run_dir: Path) -> str:
    """The generated key of ``run_dir``, creating it (0600) if missing; safe when two processes race.

    The key is written to a private temporary file first and linked into place whole, so no process ever
    reads a half-written (empty) key file.
    """
    existing = read_key(run_dir)
    if existing:
        return existing
    run_dir.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=run_dir, prefix=f".{FILE_NAME}-")  # mode 0600
    try:
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write(secrets.token_urlsafe(50) + "\n")
        with contextlib.suppress(FileExistsError):  # another process linked its key first: that one is the key
            os.link(temporary, key_file(run_dir))
    finally:
        os.unlink(temporary)
    return read_key(run_dir)


if __name__ == "__main__":
    # `make run`'s first step, before `manage.py migrate`: a key in the environment needs no file.
    if not os.environ.get("SECRET_KEY"):
        ensure_key(run_dir())
