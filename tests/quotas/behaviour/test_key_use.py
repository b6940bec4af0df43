"""Keys' last use and the address it came from, on every store: the newer note wins whatever the order the
processes write in, and the flush's forgetting drops old notes only."""

from __future__ import annotations

from typing import Any

import pytest

from quotas.exceptions import StoreUnavailable
from quotas.runtime.key_use import KeyUse


def test_the_newer_note_wins_whatever_the_order_of_the_writes(runtime):
    """Two processes' notes of one key reach Redis newest first: the older one changes neither the time nor
    the address; a note without a known address leaves the last known one."""
    key_use = runtime.store.key_use
    key_use.write({7: (2000.5, "198.51.100.2"), 8: (1000.0, "2001:db8::1")})
    key_use.write({7: (1500.25, "198.51.100.1"), 8: (3000.0, None)})
    assert key_use.last_used() == {7: 2000.5, 8: 3000.0}
    assert key_use.last_used_from() == {7: (2000.5, "198.51.100.2"), 8: (1000.0, "2001:db8::1")}
    key_use.write({7: (2500.0, "198.51.100.3")})
    assert key_use.last_used_from()[7] == (2500.0, "198.51.100.3")


def test_forgetting_drops_the_old_notes_and_keeps_the_recent(runtime):
    key_use = runtime.store.key_use
    key_use.write({1: (100.0, "192.0.2.1"), 2: (200.0, "192.0.2.2"), 3: (300.0, None)})
    assert key_use.forget_before(250.0) == 2
    assert key_use.last_used() == {3: 300.0}
    assert key_use.last_used_from() == {}
    key_use.write({4: (400.0, "192.0.2.4")})
    assert key_use.forget_before(400.0) == 1  # 3 goes; 4, used at the moment itself, stays
    assert key_use.last_used_from() == {4: (400.0, "192.0.2.4")}


class _Request:
    def __init__(self, address: str) -> None:
        self.address = address


def test_a_use_is_noted_with_its_request_and_its_address_named_when_written(runtime):
    """Naming the address waits for the poller's write; a failed write keeps the notes, their addresses named,
    and a newer use noted meanwhile wins over them."""
    named: list[str] = []

    def address_of(request: Any) -> str:
        named.append(request.address)
        return request.address

    notes = KeyUse()
    notes.touch(5, _Request("203.0.113.5"), address_of)
    notes.touch(6, _Request("203.0.113.6"), address_of)
    notes.touch(None, _Request("203.0.113.9"), address_of)  # a client without a key: nothing noted
    assert named == []

    class Down:
        def write(self, seen: Any) -> None:
            raise StoreUnavailable("down")

    with pytest.raises(StoreUnavailable):
        notes.write(Down())  # type: ignore[arg-type]
    assert sorted(named) == ["203.0.113.5", "203.0.113.6"]
    notes.touch(6, _Request("203.0.113.66"), address_of)
    notes.write(runtime.store.key_use)
    last_from = runtime.store.key_use.last_used_from()
    assert {k: address for k, (_, address) in last_from.items()} == {5: "203.0.113.5", 6: "203.0.113.66"}


def test_an_address_that_cannot_be_named_keeps_the_time(runtime):
    def broken(request: Any) -> str:
        raise RuntimeError("a project's CLIENT_IP hook failed")

    notes = KeyUse()
    notes.touch(9, object(), broken)
    notes.write(runtime.store.key_use)
    assert set(runtime.store.key_use.last_used()) == {9}
    assert runtime.store.key_use.last_used_from() == {}
