"""A client's ban and limit state outside its decisions, for operators: the ban in force, lifting it, clearing the
client's windows (``quota_status``, ``quota_reset``, the admin's unlock); and what a banned client's windows show.

A part of the store, over the store's client like the others: decisions themselves go through the decision script
(:mod:`quotas.store.redis_store`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from quotas.contract.keys import client_keys
from quotas.contract.protocol import US_PER_SECOND
from quotas.rules.limits import Window
from quotas.store.decision import WindowState, scaled
from quotas.store.failures import unavailable


@dataclass(frozen=True, slots=True)
class Ban:
    """A client's ban, as ban.lua keeps it in its ``!bn`` field."""

    until: float  # seconds since the epoch, by the Redis server's clock
    strikes: int  # bans in a row (the n-th lasts the policy's n-th duration)
    seconds_left: float = 0.0  # when read by RedisStore.ban: until it ends


#: A ``!bn`` value: "<until us>:<strikes>:<strikes kept until us>" (see ban.lua).
_BAN = re.compile(r"(\d+):(\d+):(\d+)")


def parse_ban(raw: bytes | str | None) -> Ban | None:
    """The ban in a ``!bn`` value (ended or not), or None for no value or one not in ban.lua's format."""
    found = _BAN.fullmatch(raw.decode() if isinstance(raw, bytes) else raw or "")
    return Ban(int(found[1]) / US_PER_SECOND, int(found[2])) if found else None


def glob_escape(text: str) -> str:
    """``text`` as a literal in a Redis MATCH pattern (SCAN, HSCAN)."""
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)


def banned_states(windows: Sequence[Window], wait_us: int, multiplier: float) -> list[WindowState]:
    """What a banned client's windows show: nothing left until the ban ends.

    The script does not read a banned client's limits, so there are no real
    states; these give every 429 of a ban its RateLimit headers (r=0, t = the
    ban's end) without counting as refusals of those windows (``ok`` stays True:
    the ban refused the request, not the windows).
    """
    return [WindowState(w, True, 0, wait_us, 0, quota=scaled(w, multiplier)) for w in windows]


class ClientState:
    """One client's ban and limit state under ``prefix`` in the Redis ``client`` holds; ``decision_time`` is the
    decisions' clock now (:meth:`~quotas.store.redis_store.RedisStore.decision_time`)."""

    def __init__(self, client: Any, prefix: str, buckets: int, decision_time: Callable[[str], float]) -> None:
        self._client = client
        self.prefix = prefix
        self.buckets = buckets
        self._decision_time = decision_time

    def lift_ban(self, tag: str) -> bool:
        """End ``tag``'s ban (and its refusal count); True when there was one."""
        keys = client_keys(self.prefix, tag, self.buckets)
        with unavailable(f"lifting the ban of {tag}"):
            return bool(self._client.hdel(keys.bucket, keys.field("!bn"), keys.field("!dn")))

    def ban(self, tag: str) -> Ban | None:
        """``tag``'s ban in force now (by the Redis server's clock), or None."""
        keys = client_keys(self.prefix, tag, self.buckets)
        with unavailable(f"reading the ban of {tag}"):
            ban = parse_ban(self._client.hget(keys.bucket, keys.field("!bn")))
            now = self._decision_time(keys.bucket) if ban is not None else 0.0
        return replace(ban, seconds_left=ban.until - now) if ban is not None and ban.until > now else None

    def clear(self, tag: str, windows: Sequence[Window] | None = None, keep: Sequence[Window] = ()) -> int:
        """Delete client ``tag``'s limit state; returns how many fields and keys went.

        Without ``windows``, everything the decisions keep for it: every field of
        the client in its bucket (each window's counter, its ban and refusal
        count, its expiry; found by HSCAN) and every key of its own (sliding logs,
        concurrency leases; found by a SCAN of the keyspace, on every primary of
        a cluster). With ``windows``, only their state. The state of the windows
        in ``keep`` stays either way (a budget's spending, say). Its usage counters and its
        last refusals (a record of what happened) stay. Raises
        :class:`StoreUnavailable` when Redis fails.
        """
        keys = client_keys(self.prefix, tag, self.buckets)
        with unavailable(f"resetting the counters of {tag}"):
            if windows is None:
                mine = glob_escape(keys.field_prefix) + "*"
                fields = {_raw(f) for f, _ in self._client.hscan_iter(keys.bucket, match=mine, count=1000)}
                own = {_raw(k) for k in self._client.scan_iter(match=glob_escape(keys.own_base) + "*", count=1000)}
            else:
                fields = {_raw(keys.field(w.state_field)) for w in windows if not w.has_own_key}
                own = {_raw(keys.own_key(w.state_field)) for w in windows if w.has_own_key}
            fields -= {_raw(keys.field(w.state_field)) for w in keep if not w.has_own_key}
            own -= {_raw(keys.own_key(w.state_field)) for w in keep if w.has_own_key}
            deleted = int(self._client.hdel(keys.bucket, *fields)) if fields else 0
            for key in own:  # one key per command: each of a cluster's commands names one slot
                deleted += int(self._client.unlink(key))
        return deleted


def _raw(name: bytes | str) -> bytes:
    """A field or key name as Redis holds it (the layout writes str; a client answers bytes)."""
    return name if isinstance(name, bytes) else name.encode()
