"""The usable keys' hashes a blocked address is checked against: exact membership on 64-bit prefixes."""

from __future__ import annotations

import hashlib

from quotas.rules.known_keys import KnownKeys


def digest(n: int) -> str:
    return hashlib.sha256(str(n).encode()).hexdigest()


def test_holds_exactly_the_keys_it_was_built_from():
    known = KnownKeys("7", (digest(n) for n in range(1_000)))
    assert known.version == "7"
    assert len(known) == 1_000
    assert all(digest(n) in known for n in range(1_000))
    assert not any(digest(n) in known for n in range(1_000, 3_000))
    assert None not in known


def test_takes_eight_bytes_a_key():
    assert KnownKeys("1", (digest(n) for n in range(500))).nbytes == 500 * 8


def test_an_empty_set_knows_no_key():
    known = KnownKeys("1", ())
    assert len(known) == 0
    assert digest(1) not in known
