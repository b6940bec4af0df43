"""Failed authentications are limited so that they stop guessers, not customers.

``QUOTAS['FAILED_AUTH_LIMITS']`` sets three limits, each a fixed window
counted by the engine in Redis (one atomic script per failure, shared by
every process), on a tag of its own:

- ``address`` (default 30 per 10 minutes, ``{af.<address>}``): failures from
  one client address. While it is used up, only attempts that cannot
  succeed are refused: an API key this platform does not know (decided in
  the process, without a database query, see
  :meth:`quotas.runtime.rules_cache.RulesCache.may_know_key`) and passwords from
  browsers that never signed in as that user. A valid key is answered on
  its merits: keys are 256-bit random tokens, so a valid key is never a
  lucky guess, and one guesser behind a NAT or a proxy cannot shut out every
  customer at its address.
- ``username`` (default 10 per 15 minutes, ``{afu.<hash of the username>}``):
  wrong passwords for one username from browsers without a trusted-device
  cookie for it (:mod:`quotas.identity.devices`). While it is used up, such
  attempts are refused; the owner's browser, which signed in before, is not.
- ``device`` (default 10 per 15 minutes, ``{afd.<device id>}``): wrong
  passwords sent with a trusted-device cookie, so that a stolen cookie buys
  a guesser no more than a few tries.

This is the OWASP "device cookie" design: a guesser can at worst keep new
browsers from signing in as a username under attack, never the owner's.

Each process remembers the blocks it learnt, so a blocked attempt is refused
without a Redis call, a database query or a password hash. Before a password
is checked, a process that knows of no block peeks at Redis (next to the
password hash it costs nothing), so a block holds in every process at once.
API keys are checked against what the process learnt only: a good key's
request makes no Redis call.

While Redis is unreachable each process counts failures itself, enforcing
``QUOTAS['LOCAL_SHARE']`` of each limit as the quota fallback does (logged,
and counted in ``quota_failed_authentications_total{outcome="local"}``):
authentication does not depend on Redis, and an outage does not open the
door to unlimited guessing.

Wiring: :class:`quotas.identity.backends.FailedAuthBackend` first in ``AUTHENTICATION_BACKENDS``
(passwords: the admin login, HTTP Basic), the ``user_login_failed`` and
``user_logged_in`` receivers (connected by the app), API keys in
:func:`quotas.identity.clients.authenticate_key`, and
:class:`~quotas.http.sign_in.SignInThrottleMiddleware` turning a refusal into a
429 and setting the trusted-device cookie.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from functools import lru_cache
from typing import Any

from django.http import HttpRequest

from quotas import metrics
from quotas.contract.keys import client_tag
from quotas.engine import default_engine
from quotas.exceptions import StoreUnavailable
from quotas.formats.rates import parse_rates
from quotas.identity.addresses import UNKNOWN_PEER, address_group
from quotas.identity.devices import trusted_device, username_digest
from quotas.rules.limits import LimitRule, Window
from quotas.settings import quota_settings
from quotas.store.decision import Decision

logger = logging.getLogger(__name__)

#: Blocks one process remembers at most (expired ones are dropped first).
MAX_REMEMBERED = 10_000
#: Seconds between two warnings that failures were counted in the process only (Redis unreachable).
LOG_INTERVAL = 60.0


class FailedAuth:
    """This process's view of failed authentications (see the module docstring)."""

    def __init__(self) -> None:
        self._blocked: dict[str, float] = {}  # tag -> when the block ends (the runtime clock's now())
        # "<tag>|<window>" -> (when its window started, by the runtime's clock; failures in it): counted here while
        # Redis is away.
        self._local: dict[str, tuple[float, int]] = {}
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
        now = _now()
        until = max((self._blocked.get(tag, 0.0) for tag in tags if tag), default=0.0)
        return math.ceil(until - now) if until > now else 0

    def check(self, *tags: str | None) -> int:
        """Like :meth:`wait`, but asks Redis when this process knows of no block (one peek per tag).

        For passwords: a block another process learnt applies here too, and the
        round trip costs little next to the password hash it may spare. While
        Redis is unreachable only the blocks this process knows of apply
        (including those it counted itself, :meth:`record`).
        """
        # Not QUOTAS['ENABLED']: turning quotas off leaves brute-force protection on (FAILED_AUTH_LIMITS turns
        # it off, kind by kind or all at once with None: the tags are then None).
        wait = self.wait(*tags)
        if wait:
            return wait
        store = default_engine.runtime().guard
        for tag in tags:
            if not tag:
                continue
            try:
                decision = store.peek(tag, _windows(tag))
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
        store = default_engine.runtime().guard  # whatever QUOTAS['ENABLED'] says, as in check()
        wait = 0
        for tag in tags:
            if not tag:
                continue
            try:
                decision = store.decide(tag, _windows(tag))
            except StoreUnavailable:
                metrics.observe_failed_auth("local")
                self._log_outage("counted", tag)
                wait = max(wait, self._record_locally(tag))
                continue
            if decision.allowed:
                metrics.observe_failed_auth("counted")
                self._learn(tag, decision)  # this failure may have used the limit up: the next is refused
            else:
                metrics.observe_failed_auth("refused")
                seconds = max(1, decision.retry_after or 1)
                self._remember(tag, _now() + seconds)
                wait = max(wait, seconds)
        return wait

    def _record_locally(self, tag: str) -> int:
        """Count one failure in this process while Redis is unreachable; the seconds this attempt must wait.

        As the quota fallback does (``QUOTAS['LOCAL_SHARE']``), each process enforces its share of each
        window, in fixed windows of its own clock: an outage must not open the door to unlimited guessing.
        What a process learns this way it remembers as a block (:meth:`wait`), like one learnt from Redis.
        """
        now = _now()
        share = float(quota_settings.LOCAL_SHARE)
        wait = 0
        for window in _windows(tag):
            limit = max(1, math.floor(window.quota * share))
            key = f"{tag}|{window.state_field}"
            with self._lock:
                start, count = self._local.get(key, (now, 0))
                if now - start >= window.window:
                    start, count = now, 0
                count += 1
                self._local[key] = (start, count)
                if len(self._local) > MAX_REMEMBERED:
                    self._local.pop(next(iter(self._local)))
            ends = start + window.window
            if count > limit:  # past the limit: refused, as Redis would
                wait = max(wait, max(1, math.ceil(ends - now)))
            if count >= limit:  # used up: the attempts after this one are refused until the window ends
                self._remember(tag, ends)
        return wait

    def clear(self) -> None:
        """Forget every block (the runtime was rebuilt, e.g. for another Redis)."""
        with self._lock:
            self._blocked.clear()
            self._local.clear()
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
            "quotas: while Redis is unreachable, failed authentications are limited in this process only (its "
            "LOCAL_SHARE of each limit): %d not %s in Redis in the last minute or so, e.g. of %s",
            count, what, tag,
        )  # fmt: skip

    def _learn(self, tag: str, decision: Decision) -> int:
        """Seconds ``tag`` is blocked for, from an admitted decision whose windows may be used up (then remembered)."""
        spent = [s.reset_us for s in decision.states if s.remaining is not None and s.remaining <= 0]
        if not spent:
            return 0
        seconds = max(1, math.ceil(max(spent) / 1_000_000))
        self._remember(tag, _now() + seconds)
        return seconds

    def _remember(self, tag: str, until: float) -> None:
        with self._lock:
            self._blocked[tag] = until
            if len(self._blocked) > MAX_REMEMBERED:
                now = _now()
                for key in [k for k, v in self._blocked.items() if v <= now]:
                    del self._blocked[key]
                while len(self._blocked) > MAX_REMEMBERED:
                    del self._blocked[next(iter(self._blocked))]


def _now() -> float:
    """The engine's clock (the runtime's): what blocks and the windows counted here end by."""
    return default_engine.runtime().clock.now()


#: The process's record (one per process, like the engine's memory of refused clients).
failed_auth = FailedAuth()

#: Each limit's tag kind (``{af.…}``, ``{afu.…}``, ``{afd.…}``); the unlock command reads them too.
KIND_TAG = {"address": "af", "username": "afu", "device": "afd"}
_TAG_KIND = {tag: kind for kind, tag in KIND_TAG.items()}


@lru_cache(maxsize=8)
def _rule(kind: str, rate: str) -> LimitRule:
    return LimitRule(id=f"auth.{kind}", name=f"failed-auth-{kind}", rates=parse_rates(rate), algorithm="fixed_window")


def kind_of(tag: str) -> str | None:
    """The limit a failed-authentication tag counts against (None: not such a tag)."""
    return _TAG_KIND.get(tag.strip("{}").split(".", 1)[0])


def windows_of(kind: str) -> tuple[Window, ...]:
    """The windows of limit ``kind`` as ``QUOTAS['FAILED_AUTH_LIMITS']`` sets it (none when it is off)."""
    rate = (quota_settings.FAILED_AUTH_LIMITS or {}).get(kind)
    return _rule(kind, rate).windows if rate else ()


def _windows(tag: str) -> tuple[Window, ...]:
    kind = kind_of(tag)
    return windows_of(kind) if kind else ()


def _enabled(kind: str) -> bool:
    return bool((quota_settings.FAILED_AUTH_LIMITS or {}).get(kind))


def address_tag(request: Any) -> str | None:
    """The tag failures of ``request``'s client address count against (None when that limit is off)."""
    if not _enabled("address"):
        return None
    group = address_group(request)  # DRF's request reads META from Django's
    if group == str(UNKNOWN_PEER):
        # No client address (a proxy on a Unix socket, not trusted): every client would share this
        # count, and one guesser would lock everyone out. The username limit still applies.
        return None
    return client_tag(KIND_TAG["address"], group)


#: The address tag of clients without an address (a Unix-socket proxy not in TRUSTED_PROXIES, a CLIENT_IP hook
#: returning None): used for guesses at a secret chosen by the operator, which must be limited somewhere.
NO_ADDRESS = "no-address"


def token_tag(request: Any) -> str | None:
    """The tag guesses at the metrics token count against: the client's address, or, for a client without
    one, the tag they all share (None when the address limit is off).

    Unlike a failed API key (a 256-bit token: its guessers are refused by address and valid keys are
    answered), the metrics token may be short, so a client that hides its address must not guess it freely.
    Sharing the tag means such guessers can block each other's token attempts, never API keys or sign-ins.
    """
    tag = address_tag(request)
    if tag is None and _enabled("address"):
        tag = client_tag(KIND_TAG["address"], NO_ADDRESS)
    return tag


def username_tag(username: object) -> str | None:
    """The tag wrong passwords for ``username`` count against (None when that limit is off)."""
    if not username or not _enabled("username"):
        return None
    return client_tag(KIND_TAG["username"], username_digest(username))


def device_tag(device_id: str) -> str | None:
    """The tag wrong passwords sent from trusted device ``device_id`` count against."""
    if not _enabled("device"):
        return None
    return client_tag(KIND_TAG["device"], device_id)


def password_tags(request: Any, username: object) -> tuple[str | None, ...]:
    """What a password attempt for ``username`` counts against: its trusted device's own limit, when
    the browser signed in as that user before; else its address and the username. With the device
    limit off, no browser is trusted (a stolen cookie must not buy unlimited guesses)."""
    device = trusted_device(request, username) if username and _enabled("device") else None
    if device is not None:
        return (device_tag(device),)
    return (address_tag(request), username_tag(username))


#: The key of a request's META that :func:`refuse` sets and :func:`refused_for` reads: META, which DRF's request
#: reads from Django's, so a refusal of either is seen by the middleware, given Django's.
_AUTH_WAIT = "quotas.auth_wait"


def refuse(request: Any, wait: int) -> None:
    """Mark ``request`` as refused for ``wait`` seconds; the middleware answers 429 (see the module)."""
    request.META[_AUTH_WAIT] = wait


def refused_for(request: HttpRequest) -> int:
    """Seconds a sign-in :func:`refuse` marked must wait (0: not refused)."""
    return request.META.get(_AUTH_WAIT, 0)


def forget_blocks(sender: Any, **kwargs: Any) -> None:
    """``remembered_state_stale`` receiver: forget the blocks this process learnt; Redis is asked again."""
    failed_auth.clear()


def on_login_failed(sender: Any, credentials: dict[str, Any], request: Any = None, **kwargs: Any) -> None:
    """``user_login_failed`` receiver: count the failure against what the attempt counts against."""
    if request is None:
        return
    if refused_for(request):
        # FailedAuthBackend refused the attempt before any password was checked, and Django sends this signal
        # after its PermissionDenied all the same. A refused attempt is not a failure: counting it against the
        # username would let one blocked address lock out every username it names.
        return
    wait = failed_auth.record(*password_tags(request, credentials.get("username")))
    if wait:
        refuse(request, wait)
