"""Failed authentications are limited per client address, and per username for passwords.

Guessing API keys or passwords costs the guesser: once the failures allowed
by ``QUOTAS['FAILED_AUTH_LIMITS']`` in a window are used up (by default 30
per address in 10 minutes, 10 per username in 15 minutes), every further
attempt from that address, or for that username, is refused with 429 and
``Retry-After`` until the window ends, the right credentials included (so a
blocked guesser learns nothing from a lucky guess).

Failures are counted by the engine, in Redis (one atomic script per failure,
shared by every process), as fixed windows on tags of their own
(``{af.<address>}``, ``{afu.<hash of the username>}``); successful requests
cost nothing. Each process remembers the blocks it learnt, so a blocked
client is refused without a Redis call, a database query or a password hash.

- Passwords (:class:`quotas.identity.backends.FailedAuthBackend`): when this process
  knows of no block, it peeks at Redis before the password is checked (a
  round trip next to a hash that costs far more), so a block holds in every
  process at once.
- API keys (:func:`quotas.identity.clients.identify`, on every API request): no peek,
  no Redis call for a good key. A process that has not seen this client's
  failures learns of the block at the client's next failure there, so a
  guesser gets at most one extra try per process; a guessed API key (a long
  random token) is not a practical risk, the database queries are.

While Redis is unreachable failures are neither counted nor checked (logged,
and counted in ``quota_failed_authentications_total``): authentication is
not made to depend on Redis.

Wiring: :class:`quotas.identity.backends.FailedAuthBackend` first in ``AUTHENTICATION_BACKENDS``
(passwords: the admin login, HTTP Basic), the ``user_login_failed`` receiver
(connected by the app), API keys in :func:`quotas.identity.clients.identify`, and
:class:`~quotas.http.middleware.QuotaHeadersMiddleware` turning a refusal into a
429.
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
import time
from functools import lru_cache
from typing import Any

from django.http import HttpRequest

from quotas.conf import quota_settings
from quotas.engine.decision import Decision
from quotas.engine.keys import client_tag
from quotas.exceptions import StoreUnavailable
from quotas.http.context import set_auth_wait
from quotas.observability import metrics
from quotas.rules.rates import parse_rates
from quotas.rules.snapshot import LimitRule, Window

logger = logging.getLogger(__name__)

KINDS = ("address", "username")
#: Blocks one process remembers at most (expired ones are dropped first).
MAX_REMEMBERED = 10_000
#: Seconds between two warnings that failures went uncounted (Redis unreachable).
LOG_INTERVAL = 60.0


class FailedAuth:
    """This process's view of failed authentications (see the module docstring)."""

    def __init__(self) -> None:
        self._blocked: dict[str, float] = {}  # tag -> time.time() the block ends
        self._lock = threading.Lock()
        self._logged_at = -math.inf  # time.monotonic() of the last outage warning
        self._unlogged = 0

    @property
    def blocking(self) -> bool:
        """Whether this process knows of any block (expired ones included): the cheap first check."""
        return bool(self._blocked)

    def wait(self, *tags: str | None) -> int:
        """Seconds until every one of ``tags`` may authenticate again (0: now). In-process only."""
        if not self._blocked:
            return 0
        now = time.time()
        until = max((self._blocked.get(tag, 0.0) for tag in tags if tag), default=0.0)
        return math.ceil(until - now) if until > now else 0

    def check(self, *tags: str | None) -> int:
        """Like :meth:`wait`, but asks Redis when this process knows of no block (one peek per tag).

        For passwords: a block another process learnt applies here too, and the
        round trip costs little next to the password hash it may spare. Fails
        open while Redis is unreachable.
        """
        wait = self.wait(*tags)
        if wait:
            return wait
        from quotas.engine.runtime import get_engine

        engine = get_engine()
        for tag in tags:
            if not tag:
                continue
            try:
                decision = engine.peek(tag, _windows(tag))
            except StoreUnavailable:
                metrics.observe_failed_auth("unchecked")
                self._log_outage("checked", tag)
                continue
            wait = max(wait, self._learn(tag, decision))
        return wait

    def record(self, *tags: str | None) -> int:
        """Count one failure against each tag; returns the seconds this attempt must wait (0: answer it).

        The failure that uses up a limit is answered as usual (a 401, the login
        form again); the attempts after it are refused until the window ends.
        """
        from quotas.engine.runtime import get_engine  # the engine imports identity, which imports this module

        engine = get_engine()
        wait = 0
        for tag in tags:
            if not tag:
                continue
            try:
                decision = engine.decide(tag, _windows(tag))
            except StoreUnavailable:
                metrics.observe_failed_auth("uncounted")
                self._log_outage("counted", tag)
                continue
            if decision.allowed:
                metrics.observe_failed_auth("counted")
                self._learn(tag, decision)  # this failure may have used the limit up: the next is refused
            else:
                metrics.observe_failed_auth("refused")
                seconds = max(1, decision.retry_after or 1)
                self._remember(tag, time.time() + seconds)
                wait = max(wait, seconds)
        return wait

    def clear(self) -> None:
        """Forget every block (the engine was rebuilt, e.g. for another Redis)."""
        with self._lock:
            self._blocked.clear()
            self._logged_at, self._unlogged = -math.inf, 0

    def _log_outage(self, what: str, tag: str) -> None:
        # At most one line a minute: during an outage a guesser's every attempt would log one.
        now = time.monotonic()
        with self._lock:
            self._unlogged += 1
            if now - self._logged_at < LOG_INTERVAL:
                return
            self._logged_at, count, self._unlogged = now, self._unlogged, 0
        logger.warning(
            "quotas: failed authentications are not limited while Redis is unreachable (%d not %s in the last "
            "minute or so, e.g. of %s); authentication goes on without the limit",
            count, what, tag,
        )  # fmt: skip

    def _learn(self, tag: str, decision: Decision) -> int:
        """Seconds ``tag`` is blocked for, from an admitted decision whose windows may be used up (then remembered)."""
        spent = [s.reset_us for s in decision.states if s.remaining is not None and s.remaining <= 0]
        if not spent:
            return 0
        seconds = max(1, math.ceil(max(spent) / 1_000_000))
        self._remember(tag, time.time() + seconds)
        return seconds

    def _remember(self, tag: str, until: float) -> None:
        with self._lock:
            self._blocked[tag] = until
            if len(self._blocked) > MAX_REMEMBERED:
                now = time.time()
                for key in [k for k, v in self._blocked.items() if v <= now]:
                    del self._blocked[key]
                while len(self._blocked) > MAX_REMEMBERED:
                    del self._blocked[next(iter(self._blocked))]


#: The process's record (one per process, like the engine's memory of refused clients).
failed_auth = FailedAuth()

_KIND_TAG = {"address": "af", "username": "afu"}


@lru_cache(maxsize=8)
def _rule(kind: str, rate: str) -> LimitRule:
    return LimitRule(id=f"auth.{kind}", name=f"failed-auth-{kind}", rates=parse_rates(rate), algorithm="fixed_window")


def _windows(tag: str) -> tuple[Window, ...]:
    kind = "address" if tag.startswith("{af.") else "username"
    rate = (quota_settings.FAILED_AUTH_LIMITS or {}).get(kind)
    return _rule(kind, rate).windows if rate else ()


def address_tag(request: Any) -> str | None:
    """The tag failures of ``request``'s client address count against (None when that limit is off)."""
    if not (quota_settings.FAILED_AUTH_LIMITS or {}).get("address"):
        return None
    from quotas.identity.clients import UNKNOWN_PEER, address_group

    group = address_group(_http(request))
    if group == str(UNKNOWN_PEER):
        # No client address (a proxy on a Unix socket, not trusted): every client would share this
        # count, and one guesser would lock everyone out. The username limit still applies.
        return None
    return client_tag(_KIND_TAG["address"], group)


def username_tag(username: object) -> str | None:
    """The tag failures for ``username`` count against (hashed: usernames are personal data)."""
    if not username or not (quota_settings.FAILED_AUTH_LIMITS or {}).get("username"):
        return None
    digest = hashlib.sha256(str(username).strip().casefold().encode()).hexdigest()[:24]
    return client_tag(_KIND_TAG["username"], digest)


def refuse(request: Any, wait: int) -> None:
    """Mark ``request`` as refused for ``wait`` seconds; the middleware answers 429 (see the module)."""
    set_auth_wait(_http(request), wait)


def _http(request: Any) -> HttpRequest:
    return getattr(request, "_request", request)  # DRF's Request wraps Django's


def on_login_failed(sender: Any, credentials: dict[str, Any], request: Any = None, **kwargs: Any) -> None:
    """``user_login_failed`` receiver: count the failure against the address and the username."""
    if request is None:
        return
    wait = failed_auth.record(address_tag(request), username_tag(credentials.get("username")))
    if wait:
        refuse(request, wait)
