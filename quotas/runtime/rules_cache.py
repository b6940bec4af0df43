"""Keeping this process's rules snapshot fresh: reloads, and what a changed version means.

:class:`RulesCache` holds the current :class:`~quotas.rules.snapshot.RuleSet`.
The runtime's poller (:mod:`quotas.runtime.poller`) calls :meth:`RulesCache.poll`
every ``RULES_CHECK_INTERVAL`` seconds, never on the request path: it reads one
small version key and marks the snapshot stale when it moved (the next request
reloads it), retries a reload the database refused, and retries a version bump
Redis did not take (:meth:`RulesCache.invalidate`). While that version is
unreadable (Redis down), it asks the backend's change mark in the database
instead (:mod:`quotas.runtime.change_mark`): the database, where keys live,
says when they changed.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from django.db import DatabaseError, close_old_connections, connections

from quotas import metrics, problems
from quotas.clock import SYSTEM_CLOCK, Clock
from quotas.exceptions import RulesUnavailable, StoreUnavailable
from quotas.rules.known_keys import KnownKeys
from quotas.rules.snapshot import RulesBackend, RuleSet, Subscriber
from quotas.runtime.change_mark import ChangeMark
from quotas.runtime.usable_keys import UsableKeys
from quotas.store.rules_version import RulesVersion

logger = logging.getLogger(__name__)

#: Unknown API key hashes remembered per process (see RulesCache._unknown_keys).
UNKNOWN_KEYS_CACHE_SIZE = 4096
#: Longest wait, in seconds, between two attempts to reload rules while the database fails.
MAX_RELOAD_BACKOFF = 30


_MISS = object()  # no entry in an LRU (where None is a value), or in a cache of the request path


class LRU(OrderedDict):
    """A small least-recently-used map, shared by a process's threads: the subscribers by key and by user, and
    the unknown keys (here rather than a module of its own: one module less on every request's path). Each
    OrderedDict operation is atomic under the GIL, but another thread may evict or clear a key between two of
    them, so a vanished key reads as a miss rather than raising KeyError."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def lookup(self, key: Any, default: Any = None) -> Any:
        """The value of ``key`` (now the most recent), or ``default``."""
        value = self.get(key, _MISS)  # a miss (every new client) raises nothing: an exception costs more
        if value is _MISS:
            return default
        try:  # noqa: SIM105  (contextlib.suppress is a context manager's two calls on every hit)
            self.move_to_end(key)
        except KeyError:  # evicted meanwhile: the value read is still this key's
            pass
        return value

    def put(self, key: Any, value: Any) -> None:
        """Remember ``value``, evicting the least recently used entries beyond ``size``."""
        self[key] = value
        while len(self) > self.size:
            try:
                self.popitem(last=False)
            except KeyError:  # emptied meanwhile (a reload cleared it)
                break


class RulesCache:
    """Holds the current :class:`RuleSet` of this process and keeps it fresh.

    ``current()`` is what a request calls: it returns the snapshot, reloading
    it first only when the version in Redis moved (seen by the runtime's poller,
    which reads one small key every ``interval`` seconds) or after
    :meth:`invalidate` in this process. ``fresh`` is the snapshot while no
    reload is due, else None: the hot path reads ``fresh or current()``, a call
    less on every request.
    """

    def __init__(
        self,
        backend: RulesBackend | None,
        version_counter: RulesVersion,
        interval: float,
        cache_size: int,
        *,
        on_reload: Callable[[], None] = lambda: None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        # The runtime's clock, by which the identity layer judges a key's expiry. (This cache's own retries keep
        # the real clock: they pace the poller's visits to a database, see quotas.clock.)
        self.clock = clock
        self.backend = backend
        self.version_counter = version_counter
        self.change_mark = ChangeMark(backend)  # what the poller asks while the version in Redis is unreadable
        self.interval = interval
        self.on_reload = on_reload
        self._rules: RuleSet | None = None  # the last good snapshot
        self.fresh: RuleSet | None = None  # the same while no reload is due, else None (stale, or none yet)
        # While the backend (the database) fails: failed loads in a row, when to try again, since when.
        self._failures = 0
        self._retry_at = 0.0
        self._loaded_at = 0.0
        self._last_error = ""
        self._lock = threading.Lock()
        # A version bump Redis did not take (see invalidate): owed until the poller's retry lands.
        self._bump_lock = threading.Lock()
        self._bump_owed = False
        self._bump_failures = 0
        self._by_key = LRU(cache_size)
        self._by_user = LRU(cache_size)
        #: Signed-in users' clients by user pk, made from this snapshot's subscribers and emptied with the other
        #: caches by a reload: a busy user's request makes no client and looks up no subscriber
        #: (quotas.identity.clients.identify).
        self.user_clients: dict[Any, Any] = {}
        #: Bumped by every reload: a lookup that started before a reload must not put what it read
        #: (possibly a key revoked or issued meanwhile) into the caches the reload just emptied.
        self.generation = 0
        # Hashes of keys the backend does not know: a guesser's stream of distinct keys costs one query
        # each at most, and never evicts a known key from _by_key. Cleared on every reload (a key issued
        # meanwhile bumps the rules version), so a new key works at once.
        self._unknown_keys = LRU(UNKNOWN_KEYS_CACHE_SIZE)
        # Every usable key's hash prefix, wanted once some address is blocked for failed authentications here
        # (see may_know_key), and read off the request path (quotas.runtime.usable_keys).
        self._usable = UsableKeys(backend, self._read_version)

    def current(self) -> RuleSet:
        """The snapshot to decide with (reloaded first if it is stale)."""
        rules = self.fresh
        if rules is None:
            rules = self._reload_or_keep(self._rules)
        return rules

    def _reload_or_keep(self, rules: RuleSet | None) -> RuleSet:
        """A fresh snapshot, or the last good one while the backend fails (retried with backoff).

        Once a load has failed, requests stop trying until the backoff ends: the
        poller retries (a database that is down can hold a connection attempt
        for the pool's whole timeout, which no request should wait for). A
        process with no snapshot yet raises :class:`RulesUnavailable` meanwhile.
        """
        if self._failures and time.monotonic() < self._retry_at:
            if rules is None:
                raise self._unavailable()
            return rules
        if rules is not None and self._failures and self.interval > 0:
            return rules  # the poller retries; no request waits for the database
        return self._try_reload(rules)

    def _try_reload(self, rules: RuleSet | None) -> RuleSet:
        try:
            return self.reload()
        except DatabaseError as exc:
            self._load_failed(exc)
            if rules is None:
                # The first load of this process: nothing to serve. A 503 with Retry-After, never a 500.
                raise self._unavailable() from exc
            return rules

    def _unavailable(self) -> RulesUnavailable:
        wait = max(1, math.ceil(self._retry_at - time.monotonic()))
        return RulesUnavailable(problems.rules_unavailable(wait), wait=wait)

    def _load_failed(self, exc: Exception) -> None:
        # A connection the failure broke stays broken in a thread no request cycle ever resets
        # (the poller's): drop it, so that the next attempt connects anew.
        close_old_connections()
        self._failures += 1
        # 1, 2, 4 ... 30 s between attempts: one request (or the poller) tries, the others are served.
        backoff = min(MAX_RELOAD_BACKOFF, 2 ** min(self._failures - 1, 10))
        self._retry_at = time.monotonic() + backoff
        self._last_error = f"{type(exc).__name__}: {exc}".strip()[:200]
        metrics.observe_rules_load_failure()
        metrics.set_rules_stale(True)
        if self._failures == 1:
            logger.error(
                "quotas: the rules could not be read from the database (%s); serving the last good snapshot, "
                "and 503 where there is none (a first load, a key or user not cached yet)",
                self._last_error,
            )
        else:
            logger.info(
                "quotas: the rules database failed again (%d in a row: %s); next try in %d s",
                self._failures, self._last_error, backoff,
            )  # fmt: skip

    def status(self) -> dict[str, Any]:
        """How fresh this process's snapshot is, for /healthz: ``state`` is ``ok`` or ``stale``."""
        stale = self._failures > 0
        body: dict[str, Any] = {
            "state": "stale" if stale else "ok",
            "age_s": round(time.monotonic() - self._loaded_at, 1) if self._loaded_at else None,
        }
        if stale:
            body.update(failed_loads=self._failures, last_error=self._last_error)
        return body

    def reload(self) -> RuleSet:
        """Build a fresh snapshot from the backend now."""
        with self._lock:
            version = self._read_version()
            self.change_mark.before_load()
            rules = self.backend.load() if self.backend is not None else RuleSet((), None)
            rules.version = version
            self.generation += 1
            self._by_key.clear()
            self._by_user.clear()
            self._unknown_keys.clear()
            self.user_clients.clear()
            self._rules = self.fresh = rules
            self._loaded_at = time.monotonic()
            if self._failures:
                logger.warning("quotas: rules reloaded after %d failed attempts", self._failures)
                self._failures, self._retry_at, self._last_error = 0, 0.0, ""
                metrics.set_rules_stale(False)
        self.on_reload()
        return rules

    def carry_over(self, parent: RulesCache) -> None:
        """In a forked child, before its first use: start from ``parent``'s snapshot and lookups (its parent's
        cache, left with the parent's runtime), so that a child of a warmed-up process decides without a query."""
        self._rules, self.fresh, self._loaded_at = parent._rules, parent.fresh, parent._loaded_at
        self.generation = parent.generation
        self._by_key.update(parent._by_key)
        self._by_user.update(parent._by_user)
        self._unknown_keys.update(parent._unknown_keys)
        self.user_clients.update(parent.user_clients)

    def mark_stale(self) -> None:
        """Reload this process's snapshot on its next use."""
        self.fresh = None

    def committed(self) -> None:
        """A change to what the rules are built from was committed: move the database's change mark on (which
        every process asks while Redis is unreadable), then :meth:`invalidate`."""
        self.change_mark.move()
        self.invalidate()

    def invalidate(self) -> None:
        """Tell every process that rules changed: bump the version, reload here.

        A bump Redis does not take (unreachable, a failover) is owed: the poller
        retries it every ``interval`` until it lands, so that other processes do
        not keep serving what changed (a revoked key) until the next change.
        """
        self.fresh = None
        self.on_reload()
        with self._bump_lock:
            self._bump_owed = True
        self._bump_version()

    def _bump_version(self) -> None:
        """INCR the version key if a bump is owed; logs the first failure and the bump that lands after one."""
        with self._bump_lock:
            if not self._bump_owed:
                return
            try:
                self.version_counter.bump()
            except StoreUnavailable as exc:
                self._bump_failures += 1
                if self._bump_failures == 1:
                    retry = f"retrying every {self.interval:g} s, while this process runs, until Redis takes it"
                    if self.interval <= 0:
                        retry = "not retried: with RULES_CHECK_INTERVAL 0 no process polls the version"
                    logger.warning("quotas: could not bump the rules version (%s); %s", exc, retry)
                return
            self._bump_owed = False
            if self._bump_failures:
                logger.warning(
                    "quotas: rules version bumped after %d failed attempts; other processes reload their rules now",
                    self._bump_failures,
                )
                self._bump_failures = 0

    def subscriber_for_key(self, key_hash: str) -> Subscriber | None:
        """The subscriber of an API key hash (cached; one query per key per reload).

        Raises :class:`RulesUnavailable` when the key is not cached and the database fails.
        """
        if self.backend is None or key_hash in self._unknown_keys:
            return None
        subscriber = self._by_key.lookup(key_hash)
        if subscriber is not None:
            return subscriber
        generation = self.generation
        subscriber = self._query(self.backend.subscriber_for_key, key_hash)
        if generation == self.generation:
            (self._by_key if subscriber is not None else self._unknown_keys).put(key_hash, subscriber)
        return subscriber

    def subscriber_for_user(self, user_id: Any) -> Subscriber | None:
        """The subscriber of a user (cached like :meth:`subscriber_for_key`)."""
        backend = self.backend
        if backend is None:
            return None
        subscriber = self._by_user.get(user_id, _MISS)  # None is remembered too: a user without one
        if subscriber is not _MISS:  # a new user's miss (the common case) calls no lookup(): identify 1,500 less
            return self._by_user.lookup(user_id, subscriber)  # now the most recent
        generation = self.generation
        subscriber = self._query(backend.subscriber_for_user, user_id)
        if generation == self.generation:
            self._by_user.put(user_id, subscriber)
        return subscriber

    def may_know_key(self, key_hash: str) -> bool:
        """Whether ``key_hash`` may be a usable API key's, answered without a query per guessed key.

        For a client address blocked for failed authentications: its unknown keys
        are refused without touching the database, its valid keys answered. The
        hashes of every usable key (:class:`~quotas.rules.known_keys.KnownKeys`)
        are read in the background, the first time a blocked address sends a key
        and again whenever the rules version moves. A key missing from a set read
        before the version last moved (a key issued since, in any process), or
        sent before the first set is read, is looked up alone: one query, so a key
        that authenticates is never refused for its address. That costs a Redis
        GET of the rules version per key not in the set; while the database fails,
        only keys cached in this process pass.
        """
        if self.backend is None or key_hash in self._unknown_keys:
            return False
        if self._by_key.lookup(key_hash) is not None:
            return True
        self._usable.wanted = True
        known = self._usable.current
        if known is not None and key_hash in known:
            return True
        version = self._read_version()
        if known is not None and known.version == version and version != "?":
            return False  # the set is as current as the rules: a guess
        self.refresh_known_keys()
        try:
            return self.subscriber_for_key(key_hash) is not None
        except RulesUnavailable:
            return False

    @property
    def known_keys(self) -> KnownKeys | None:
        """The usable keys' hashes as last read (None: not read in this process)."""
        return self._usable.current

    def refresh_known_keys(self) -> None:
        """Read every usable key's hash again, on a thread of its own; at most one read at a time."""
        self._usable.refresh()

    def _query(self, lookup: Callable[[Any], Any], arg: Any) -> Any:
        """``lookup(arg)`` on the backend; :class:`RulesUnavailable` while the database fails.

        A failure starts the same backoff as a failed reload, so the requests
        after it answer at once instead of each waiting for the database.
        """
        if self._failures and time.monotonic() < self._retry_at:
            raise self._unavailable()
        try:
            return lookup(arg)  # not lookup(*args): a call from C (CALL_FUNCTION_EX) on every new user
        except DatabaseError as exc:
            self._load_failed(exc)
            raise self._unavailable() from exc

    def _read_version(self) -> str:
        try:
            return self.version_counter.read()
        except StoreUnavailable:
            logger.warning("quotas: rules version unreadable (Redis down?)")
            return "?"

    def poll(self) -> None:
        """The poller's visit (see :mod:`quotas.runtime.poller`): pay an owed version bump, see a version that
        moved, and retry a failed reload off the request path."""
        if self._bump_owed:
            self._bump_version()
        self.change_mark.retry()
        rules = self._rules
        version = self._read_version()
        known = self._usable.current
        if self._usable.wanted and (known is None or known.version != version):
            self.refresh_known_keys()  # a key issued or revoked since: read them again before a request must ask
        if rules is not None and self.fresh is not None and version != rules.version:
            self.fresh = None
            # What this process remembers (refused clients, failed-authentication blocks) is forgotten when the
            # change is seen, not at the next reload: a process that serves only sign-ins never reloads.
            self.on_reload()
        elif rules is not None and self.fresh is not None and version == "?" and self.change_mark.moved():
            # Redis is unreadable, so its version says nothing: the database's change mark says the rules changed.
            self.fresh = None
            self.on_reload()
            if self._usable.wanted:
                self.refresh_known_keys()  # a key revoked or issued: the set read under the same "?" is not current
        if rules is not None and self._failures and time.monotonic() >= self._retry_at:
            try:
                self._try_reload(rules)
            finally:
                connections.close_all()  # the poller serves no request: hand its connection back now
