"""Failed-authentication blocks as operators see them: list them, lift them (``manage.py quota_auth_blocks``).

A block is a used-up fixed window of :mod:`quotas.identity.auth_failures`,
kept in the client's bucket hash like any window (:mod:`quotas.contract.keys`).
Listing scans every bucket for the failed-authentication tags and reads each
one's standing with a peek (nothing is counted); lifting deletes the window
and bumps the rules version, so that every process forgets the blocks it
remembered within a second (see :meth:`quotas.runtime.Runtime.forget`).
Addresses are kept as written (IPv6 networks and long values hashed) and
usernames always hashed, so a listing names usernames only by their hash;
:func:`tag_for` turns what an operator knows into the tag to lift.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from quotas.contract.keys import client_tag
from quotas.identity.addresses import group_of
from quotas.identity.auth_failures import KIND_TAG, kind_of, windows_of
from quotas.identity.devices import username_digest
from quotas.runtime import Runtime


@dataclass(frozen=True, slots=True)
class Block:
    """One client's failed-authentication count, and whether it is blocking now."""

    kind: str  # "address", "username" or "device"
    tag: str  # the client tag, e.g. "{af.203.0.113.5}"
    failures: int  # failures counted in the current window
    limit: int
    seconds_left: int  # until the window ends

    @property
    def blocked(self) -> bool:
        """Whether attempts that count against this tag are refused now."""
        return self.failures >= self.limit


def tag_for(kind: str, value: str) -> str:
    """The tag of an address (``203.0.113.5``, ``2001:db8::1``), a username or a device id."""
    if kind == "address":
        try:
            ip = ipaddress.ip_address(value.strip())
        except ValueError as exc:
            raise ValueError(f"{value!r} is not an IP address") from exc
        return client_tag(KIND_TAG["address"], group_of(ip))
    if kind == "username":
        return client_tag(KIND_TAG["username"], username_digest(value))
    if kind == "device":
        return client_tag(KIND_TAG["device"], value.strip())
    raise ValueError(f"{kind!r} is not one of {', '.join(KIND_TAG)}")


def list_blocks(runtime: Runtime, blocked_only: bool = True) -> list[Block]:
    """Every failed-authentication count in Redis (only those blocking now, by default), longest left first.

    Raises :class:`StoreUnavailable` when Redis cannot be read.
    """
    fields = {window.state_field: kind for kind in KIND_TAG for window in windows_of(kind)}
    found = runtime.store.server.client_tags("af*|*")
    tags = {tag for tag, windows in found.items() if windows & fields.keys()}
    blocks = [block for tag in sorted(tags) if (block := standing(runtime, tag)) is not None]
    if blocked_only:
        blocks = [b for b in blocks if b.blocked]
    return sorted(blocks, key=lambda b: (-b.seconds_left, b.tag))


def standing(runtime: Runtime, tag: str) -> Block | None:
    """The count of failed-authentication ``tag`` in its current window (None: no such limit is on)."""
    kind = kind_of(tag)
    windows = windows_of(kind) if kind else ()
    if not windows:
        return None
    decision = runtime.guard.peek(tag, windows)
    state = max(decision.states, key=lambda s: s.reset_us)
    used = state.quota - (state.remaining or 0)
    return Block(kind or "", tag, used, state.quota, -(-state.reset_us // 1_000_000))


def lift(runtime: Runtime, tag: str) -> bool:
    """End ``tag``'s block now (its failures are forgotten); every process forgets it within a second.

    Returns whether there was anything to lift. Raises :class:`StoreUnavailable`.
    """
    kind = kind_of(tag)
    # Its failed-authentication windows only; every process drops the blocks it remembered.
    return bool(runtime.reset_client(tag, windows_of(kind) if kind else ()))
