"""The quotas app's public API for projects: the names on the API reference page (``docs/api.md``).

Everything in ``__all__`` is stable (see ``docs/versioning.md``); a test keeps
this list and the reference page the same. Anything else under ``quotas``
may change without notice: the store, the guard, the runtime and the Redis
formats. The platform's own apps (plans, usage, adaptive, dashboard) reach
those through :mod:`quotas.internal_api`, which is not for projects.

- The decision service, for a front door of one's own: :class:`Facts`,
  :func:`check`, :func:`check_async`, :class:`Verdict`, :func:`settle`; the
  :class:`Engine` a front door holds (``quotas.engine.default_engine`` unless
  it names another).
- Clients: :class:`Client`, :func:`identify`, :func:`standing`,
  :func:`last_refusals`, :func:`lift_ban`.
- Operations and tests: :func:`reset`, :func:`celery_sentinel_broker`.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from quotas import decide
from quotas.decide import Facts, Verdict, settle
from quotas.engine import Engine, default_engine
from quotas.exceptions import ResetNotConfirmed
from quotas.formats.store_urls import celery_sentinel_broker
from quotas.identity.auth_failures import failed_auth
from quotas.identity.clients import Client
from quotas.identity.clients import identify as identify_with
from quotas.observability.refusals import read_refusals
from quotas.standing import current_standing

__all__ = [
    "Client", "Engine", "Facts", "Verdict", "celery_sentinel_broker", "check", "check_async", "identify",
    "last_refusals", "lift_ban", "reset", "settle", "standing",
]  # fmt: skip


def check(facts: Facts, engine: Engine | None = None) -> Verdict:
    """The verdict on one request, given its ``facts`` (a refusal is returned in it, never raised), decided by
    ``engine`` (the process's unless given). After the view, :func:`settle` it."""
    return decide.check(engine or default_engine, facts)


async def check_async(facts: Facts, engine: Engine | None = None) -> Verdict:
    """:func:`check` for an async view: the store call awaits redis-py's asyncio client; the steps around it that
    may block (the rules, an API key read from the database) run in asgiref's worker thread."""
    return await decide.check_async(engine or default_engine, facts)


def identify(request: HttpRequest, user: Any = None, auth: Any = None) -> Client:
    """The client of ``request`` as every limit sees it: its API key's subscription, else ``user`` (default:
    ``request.user``), else its address. ``auth`` is what DRF's authentication found (``request.auth``).

    Raises :class:`~quotas.exceptions.InvalidAPIKey` for a key this platform does not know.
    """
    if user is None:
        user = getattr(request, "user", None)
    rules = default_engine.runtime().rules
    rules.current()  # as a request does before it identifies its client: a rules change reloads first
    return identify_with(request, user, rules, auth)


def lift_ban(tag: str) -> bool:
    """End client ``tag``'s ban now (and its count of refusals); every process forgets it within a second.
    Returns whether it was banned. Raises :class:`~quotas.exceptions.StoreUnavailable` when Redis fails."""
    return default_engine.runtime().lift_ban(tag)


def standing(client: Client) -> dict[str, Any]:
    """``client``'s live standing (every limit and budget that applies, its plan, an upgrade offer), read with
    one peek that consumes nothing. Raises :class:`~quotas.exceptions.StoreUnavailable` when Redis fails."""
    runtime = default_engine.runtime()
    return current_standing(client, runtime.rules.current(), runtime)


def last_refusals(tag: str) -> list[Any]:
    """The last refusals of client ``tag`` that the runtimes wrote to Redis, newest first."""
    runtime = default_engine.runtime()
    return read_refusals(runtime.store.refusals, tag)


def reset(*, confirm: bool = False, delete_usage: bool = False) -> int:
    """Forget every counter, ban and failed-authentication block of this project: for a project's tests.

    Deletes every Redis key under ``QUOTAS['KEY_PREFIX']`` (on every primary of
    a cluster) but the usage counters, drops what this process remembers
    (refused clients, blocks, the local fallback's counts), and bumps the rules
    version so that every other process forgets what it remembers within a
    second. Returns the number of keys deleted.

    It acts on whatever Redis ``QUOTAS['REDIS_URL']`` names, so it does nothing
    unless the caller says it means it: ``confirm=True`` (the ``quota_reset``
    fixture of :mod:`quotas.testing` does). Usage counted but not yet copied to
    the database is billing data: it is kept (keys and this process's unwritten
    counts) unless ``delete_usage=True`` too.

    Raises :class:`~quotas.exceptions.ResetNotConfirmed` without ``confirm``, and
    :class:`~quotas.exceptions.StoreUnavailable` when Redis cannot be reached.
    """
    if not confirm:
        raise ResetNotConfirmed(
            "quotas.api.reset() erases every client's counters, bans and blocks on the Redis QUOTAS['REDIS_URL'] "
            "names; call it as reset(confirm=True) (and delete_usage=True to erase unflushed usage too)."
        )
    runtime = default_engine.runtime()
    deleted = runtime.store.server.erase(keep_usage=not delete_usage)
    runtime.guard.deny_memory.clear()
    runtime.guard.fallback.clear()
    if delete_usage:
        runtime.guard.usage_buffer.take()  # counted before the reset: dropped with the rest
    failed_auth.clear()
    runtime.rules.invalidate()  # other processes forget what they remember
    return deleted
