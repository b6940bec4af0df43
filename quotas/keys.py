"""Every Redis key the engine uses is built here.

Layout: one hash per client, ``<prefix>:{<client>}``, with one field per
counter-style window (``<limit id>:<algorithm><window>``), and one sorted set
per sliding-log window, ``<prefix>:{<client>}:<limit id>:sl<window>``. The
client part is a Redis Cluster hash tag, so all keys of one decision hash to
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
    "period_quota": "pq",
    "period_requests": "pr",
    "budget": "bd",
    "concurrency": "cc",
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


def client_key(prefix: str, tag: str) -> str:
    """The client's hash; also the start of its other keys."""
    return f"{prefix}:{tag}"


def window_field(limit_id: str, algorithm: str, window: int) -> str:
    """The client-independent name of a window (precomputed per window)."""
    return f"{encode_part(limit_id)}:{_ALGORITHM_TAGS[algorithm]}{window}"


def log_key(client: str, field: str) -> str:
    """The sorted set of a sliding-log window: ``client_key:field``."""
    return f"{client}:{field}"


def window_key(prefix: str, tag: str, limit_id: str, algorithm: str, window: int) -> str:
    """Where one window of one client lives: a log key, or the client hash."""
    client = client_key(prefix, tag)
    if algorithm in ("sliding_window_log", "concurrency"):
        return log_key(client, window_field(limit_id, algorithm, window))
    return client


def rules_version_key(prefix: str) -> str:
    """The key whose value changes whenever plans or limits change."""
    return f"{prefix}:rules-version"


def usage_key_base(client: str) -> str:
    """The start of a client's usage keys; the decision script appends ``:<YYYYMMDD>``."""
    return f"{client}:u"
