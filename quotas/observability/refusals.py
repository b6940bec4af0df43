"""Each client's last refusals, for "why was this client refused at 14:05?".

A refusal is noted in this process (:meth:`RefusalLog.note`, a few dict
stores under a lock, no Redis): when, why (the metrics' reason), the plan
and scope, and for each window that refused, its limit, window, remaining,
reset and retry-after at that moment (a ban's end for a ban; the entry id
for an access-list denial). The runtime's poller thread writes the notes
about once a second (:meth:`RefusalLog.write`, from ``Runtime.tick``) through
the store's :class:`~quotas.store.refusal_lists.RefusalLists`, in one pipeline:
per client, ``LPUSH <KEY_PREFIX>:why:{<client>}`` then ``LTRIM`` to the last
:data:`KEEP_PER_CLIENT` and ``EXPIRE`` :data:`TTL_SECONDS`. So a request never
waits for it, and the decision script is not involved.

Bounds:

* at most one record per client per second (by the decision's clock): a
  flood answered from process memory (``decision.local``) leaves one record a
  second per process, not one per request; the rest are counted in
  :attr:`RefusalLog.capped`;
* at most :data:`BUFFER_SIZE` records waiting in a process (Redis down): the
  oldest are dropped first and counted in :attr:`RefusalLog.dropped`;
* at most ``QUOTAS['REFUSALS_ANONYMOUS_PER_HOUR']`` distinct anonymous clients
  (``ip.*`` tags) recorded per process per hour (by the decision's clock):
  an attacker rotating through IPv6 prefixes would otherwise leave a list
  living a day for every address. Later anonymous clients' refusals are
  counted in :attr:`RefusalLog.anonymous_capped`; subscribers and users are
  never capped so;
* what a killed process had not written yet (up to about a second) is lost.

A record is a small JSON object; :func:`read_refusals` returns them newest first.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import deque
from datetime import UTC, datetime
from typing import Any

from quotas import metrics
from quotas.clock import SYSTEM_CLOCK, Clock
from quotas.contract.protocol import US_PER_SECOND
from quotas.exceptions import StoreUnavailable
from quotas.formats.money import api_amount, from_micros
from quotas.settings import quota_settings
from quotas.store.decision import Decision, WindowState
from quotas.store.refusal_lists import RefusalLists

logger = logging.getLogger(__name__)

#: Records kept per client in Redis: its last 20 refusals.
KEEP_PER_CLIENT = 20
#: A client's list goes this long after its last refusal was written.
TTL_SECONDS = 86_400
#: Records a process holds before writing them (more while Redis is unreachable); the oldest go first.
BUFFER_SIZE = 1_000
#: The tags of anonymous clients (by address) start so (``{ip.192.0.2.1}``).
ANONYMOUS = "ip."

Record = dict[str, Any]


class RefusalLog:
    """The refusals this process noted since its last write. One per runtime; thread-safe."""

    def __init__(self, size: int = BUFFER_SIZE, clock: Clock = SYSTEM_CLOCK) -> None:
        self.now = clock.now  # the runtime's clock: when an access list's refusal happened
        self._lock = threading.Lock()
        self._size = size
        self._pending: deque[tuple[str, Record]] = deque()
        self._last: dict[str, int] = {}  # client -> the second of its last record
        self._newest = 0  # the newest second noted: older entries of _last can no longer block anything
        self._anonymous: set[str] = set()  # the anonymous clients recorded in hour _anonymous_hour
        self._anonymous_hour = -1
        self.dropped = 0  # records lost to the buffer's bound
        self.capped = 0  # refusals not recorded: their client already had one that second
        self.anonymous_capped = 0  # refusals not recorded: too many anonymous clients this hour

    def note(self, client_tag: str, decision: Decision, plan: str | None, scope: str, reason: str) -> None:
        """Note the refusal ``decision`` of ``client_tag`` (``reason`` as the metrics label it)."""
        if not self._admit(client_tag, decision.now):
            return
        record: Record = {
            "at": round(decision.now, 3),
            "reason": reason,
            "plan": plan,
            "scope": scope,
            "retry_after": decision.retry_after,
            "windows": [_window(state) for state in decision.denying_states()],
        }
        if decision.local:  # answered from process memory (or by the local fallback), not read from Redis
            record["local"] = True
        if decision.banned or decision.ban_started:
            record["ban_until"] = round(decision.now + decision.ban_wait_us / US_PER_SECOND, 3)
        self._push(client_tag, record)

    def note_acl(self, client_tag: str, plan: str | None, scope: str, entry_id: Any, now: float) -> None:
        """Note that access-list entry ``entry_id`` refused ``client_tag`` at ``now`` (no window involved)."""
        if self._admit(client_tag, now):
            record = {"at": round(now, 3), "reason": "acl", "plan": plan, "scope": scope, "acl_entry": entry_id}
            self._push(client_tag, record)

    def write(self, lists: RefusalLists) -> bool:
        """Write the noted records to the store's lists; True when written (or nothing to write).

        On a Redis error the records are kept for the next call (within the
        buffer's bound), the error is counted as
        ``quota_redis_errors_total{operation="refusals"}`` and logged, and
        False is returned: the poller's tick carries on with its other work.
        """
        with self._lock:
            pending, self._pending = self._pending, deque()
            self._prune()
        if not pending:
            return True
        by_client: dict[str, list[str]] = {}
        for tag, record in pending:
            by_client.setdefault(tag, []).append(json.dumps(record, separators=(",", ":")))
        try:
            lists.write(by_client, KEEP_PER_CLIENT, TTL_SECONDS)
        except StoreUnavailable:
            metrics.observe_redis_error("refusals")
            logger.warning("quotas: writing %d refusal records failed; kept for the next try", len(pending))
            self._keep(pending)
            return False
        return True

    def __len__(self) -> int:
        return len(self._pending)

    def _admit(self, client_tag: str, now: float) -> bool:
        """Whether ``client_tag`` may have a record at ``now``: its first this second."""
        second = int(now)
        with self._lock:
            if self._last.get(client_tag) == second:
                self.capped += 1
                metrics.observe_refusal_record_lost("capped")
                return False
            if client_tag.lstrip("{").startswith(ANONYMOUS) and not self._admit_anonymous(client_tag, second):
                self.anonymous_capped += 1
                metrics.observe_refusal_record_lost("anonymous_cap")
                return False
            self._last[client_tag] = second
            self._newest = max(self._newest, second)
            if len(self._last) > self._size:  # many clients within one write interval
                self._prune()
                if len(self._last) > self._size:  # all within this second: forgetting them costs a record each
                    self._last.clear()
            return True

    def _admit_anonymous(self, client_tag: str, second: int) -> bool:
        """Whether anonymous ``client_tag`` may be recorded in the hour of ``second`` (called with the lock held).

        A set of at most the cap's size: the clients recorded this hour.
        """
        hour = second // 3600
        if hour > self._anonymous_hour:  # never back: processes' clocks may disagree around the hour
            self._anonymous_hour = hour
            self._anonymous.clear()
        if client_tag in self._anonymous:
            return True
        if len(self._anonymous) >= int(quota_settings.REFUSALS_ANONYMOUS_PER_HOUR):
            return False
        self._anonymous.add(client_tag)
        return True

    def _push(self, client_tag: str, record: Record) -> None:
        with self._lock:
            if len(self._pending) >= self._size:
                self._pending.popleft()
                self.dropped += 1
                metrics.observe_refusal_record_lost("dropped")
            self._pending.append((client_tag, record))

    def _keep(self, failed: deque[tuple[str, Record]]) -> None:
        """Put records a write failed to store back, before those noted since (they are older)."""
        with self._lock:
            failed.extend(self._pending)
            while len(failed) > self._size:
                failed.popleft()
                self.dropped += 1
                metrics.observe_refusal_record_lost("dropped")
            self._pending = failed

    def _prune(self) -> None:
        # Called with the lock held. An entry of an earlier second blocks nothing any more.
        self._last = {tag: s for tag, s in self._last.items() if s >= self._newest}


def _window(state: WindowState) -> Record:
    """What one refusing window said: its limit, window, and where the client stood."""
    window = state.window
    out: Record = {
        "policy": window.policy,
        "window": window.period or window.window,  # seconds, or a calendar period's name
        "limit": state.quota,
        "remaining": _not_negative(state.remaining),  # from process memory: what Redis said at the refusal
        "reset": round(state.reset_us / US_PER_SECOND, 3),
        "retry_after": None if state.retry_us is None else round(state.retry_us / US_PER_SECOND, 3),
    }
    if window.currency:  # a budget: limit and remaining are micro-units here, money when read
        out["currency"] = window.currency
    return out


def _not_negative(remaining: int | None) -> int | None:
    """What a window had left: never below 0. A limit cut by an adaptive multiplier below what the client had
    already used refuses with ``quota - used`` (5 - 6 = -1 from the scripts' fixed window and log), which means
    nothing left. None stays None: a refusal remembered in process memory read nothing from Redis."""
    return None if remaining is None else max(0, remaining)


def _as_money(window: Record) -> Record:
    """A budget's window as the API gives money everywhere: limit and remaining as decimal strings ("0.300000")
    of its currency; a rate's window unchanged."""
    if window.get("currency"):
        for name in ("limit", "remaining"):
            if isinstance(window.get(name), int):
                window[name] = api_amount(from_micros(window[name]))
    return window


def read_refusals(lists: RefusalLists, tag: str) -> list[Record]:
    """Client ``tag``'s last refusals in the store (``s.12`` or ``{s.12}``), newest first.

    Each record as noted, plus ``time``: its ``at`` (epoch seconds) in ISO 8601, UTC; a window's remaining is
    never below 0; a budget's limit and remaining are decimal strings of its currency, as money is everywhere
    in the API. Raises :class:`~quotas.exceptions.StoreUnavailable` when Redis fails.
    """
    records = []
    for raw in lists.read(tag, KEEP_PER_CLIENT):
        try:
            record = json.loads(raw)
            record["time"] = datetime.fromtimestamp(record["at"], UTC).isoformat(timespec="milliseconds")
            if "windows" in record:
                # Records noted by an earlier version may say -1 (they live a day): read as 0 too.
                windows = [{**w, "remaining": _not_negative(w.get("remaining"))} for w in record["windows"] or []]
                record["windows"] = [_as_money(w) for w in windows]
        except (ValueError, TypeError, KeyError):  # not ours: skipped rather than failing the page
            continue
        records.append(record)
    return records
