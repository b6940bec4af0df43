"""Redis failures as the store's own error, so that nothing above the store catches redis-py's exceptions."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from quotas.exceptions import ScriptFailed, StoreUnavailable
from quotas.store.backends.connect import STORE_ERRORS, is_script_error


@contextmanager
def unavailable(what: str) -> Iterator[None]:
    """Raise :class:`StoreUnavailable` ("``what`` failed: ...", chained) for what a client raises when Redis
    fails inside the block: :class:`ScriptFailed` for an error reply about the command itself."""
    try:
        yield
    except STORE_ERRORS as exc:
        kind = ScriptFailed if is_script_error(exc) else StoreUnavailable
        raise kind(f"{what} failed: {exc}") from exc
