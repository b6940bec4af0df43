"""Every Redis key the engine uses is built here.

Layout: ``<prefix>:{<client>}:<limit id>:<algorithm><window>``. The client
part sits in a Redis Cluster hash tag, so all keys of one decision hash to
one slot and the decision script stays valid on a cluster. Client text is
encoded so that it can never contain ``{``, ``}``, ``:`` or bytes that would
break out of its place, and is bounded in length.
"""

from __future__ import annotations

import base64
import hashlib
import re

_SAFE = re.compile(r"[A-Za-z0-9._-]{1,64}")
_ALGORITHM_TAGS = {
    "fixed_window": "fw",
    "sliding_window_log": "sl",
    "sliding_window_counter": "sc",
    "token_bucket": "tb",
    "leaky_bucket": "lb",
}


def encode_part(value: str | bytes) -> str:
    """A key-safe, bounded form of ``value``; distinct inputs stay distinct.

    Short values made only of ``[A-Za-z0-9._-]`` are kept as they are (readable
    keys in redis-cli); anything else becomes ``~`` plus an unpadded base32 of
    its SHA-256 prefix, which can never collide with a kept value.
    """
    if isinstance(value, str) and _SAFE.fullmatch(value):
        return value
    raw = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else value
    digest = hashlib.sha256(raw).digest()[:15]
    return "~" + base64.b32encode(digest).decode("ascii").lower()


def client_tag(kind: str, value: str | bytes) -> str:
    """The hash-tagged client part of a key: ``{<kind>.<encoded value>}``."""
    return "{" + kind + "." + encode_part(value) + "}"


def client_prefix(prefix: str, tag: str) -> str:
    """The part of a client's keys before :func:`window_suffix`."""
    return f"{prefix}:{tag}:"


def window_suffix(limit_id: str, algorithm: str, window: int) -> str:
    """The client-independent end of a window's key (precomputed per window)."""
    return f"{encode_part(limit_id)}:{_ALGORITHM_TAGS[algorithm]}{window}"


def window_key(prefix: str, tag: str, limit_id: str, algorithm: str, window: int) -> str:
    """The key of one rate window of one limit for one client."""
    return client_prefix(prefix, tag) + window_suffix(limit_id, algorithm, window)


def rules_version_key(prefix: str) -> str:
    """The key whose value changes whenever plans or limits change."""
    return f"{prefix}:rules-version"
