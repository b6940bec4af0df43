"""Every Redis key the engine uses is built here.

Layout. Clients are spread over ``KEY_BUCKETS`` buckets by a CRC32 of their
id; each bucket is one hash, ``<prefix>:{b<n>}``, holding the counter-style
windows of all its clients as fields ``<client>|<window>`` (``<window>`` is
``<limit id>:<algorithm><seconds>``), each client's ban state
(``<client>|!dn``, ``<client>|!bn``) and expiry (``<client>|~``, epoch
seconds after which all its fields may go), and the bucket's own expiry
(``~``). A settlement Redis took is marked for an hour by a key of its
own, ``<prefix>:{b<n>}:s:<settlement id>``, so that its retry changes nothing.
Sliding logs and concurrency leases keep a sorted set each,
``<prefix>:{b<n>}:l:<client>|<window>``, and usage one hash per bucket and
day, ``<prefix>:{b<n>}:u:<YYYYMMDD>``, with fields
``<client>|<plan>|<scope>|<counter>``.

Why buckets: a Redis key costs about 100 bytes before it holds anything
(dict entry, key string, object header, expiry entry), more than the state
of an O(1) limit itself. Small hashes are stored as one packed list, so a
client's window costs only its field and value (about 30 bytes). The bucket
is the key's Redis Cluster hash tag, so every key of one decision hashes to
one slot and the decision script stays valid on a cluster.

Client text is encoded so that it can never contain ``{``, ``}``, ``:``,
``|`` or bytes that would break out of its place, and is bounded in length.
"""

from __future__ import annotations

import base64
import hashlib
import re
import zlib
from typing import NamedTuple

from quotas.contract.protocol import Algorithm

#: The longest value kept as it is.
_MAX_KEPT = 64
_SAFE = re.compile(rf"[A-Za-z0-9._-]{{1,{_MAX_KEPT}}}")
#: Client ids longer than this are hashed, so that a field stays small enough
#: for Redis's packed small-hash encoding (64 bytes a field by default).
_MAX_ID = 40


def encode_part(value: str | bytes) -> str:
    """A key-safe, bounded form of ``value``; distinct inputs stay distinct.

    Short values made only of ``[A-Za-z0-9._-]`` are kept as they are (readable
    keys in redis-cli); anything else becomes ``~`` plus an unpadded base32 of
    its SHA-256 prefix, which can never collide with a kept value.
    """
    if isinstance(value, str) and (
        # A numeric id (most users and subscriptions) is told kept by two C calls, without the regex.
        (value.isdigit() and value.isascii() and len(value) <= _MAX_KEPT) or _SAFE.fullmatch(value)
    ):
        return value
    raw = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else value
    digest = hashlib.sha256(raw).digest()[:15]
    return "~" + base64.b32encode(digest).decode("ascii").lower()


def client_tag(kind: str, value: str | bytes) -> str:
    """A client's identity as the engine names it: ``{<kind>.<encoded value>}``."""
    if type(value) is str and value.isdigit() and value.isascii() and len(value) <= _MAX_KEPT:
        return f"{{{kind}.{value}}}"  # encode_part's first case (most users), without its call
    return "{" + kind + "." + encode_part(value) + "}"


def subscription_id(tag: str) -> int | None:
    """The subscription a client ``tag`` names (:func:`client_tag`'s kind ``s``: ``{s.12}``), else None."""
    kind, _, ident = tag.strip("{}").partition(".")
    return int(ident) if kind == "s" and ident.isdigit() else None


def client_id(tag: str) -> str:
    """The client part of its fields and keys: the tag without braces, hashed when long."""
    text = tag.strip("{}")
    if len(text) <= _MAX_ID:
        return text
    return "~" + base64.b32encode(hashlib.sha256(text.encode()).digest()[:10]).decode("ascii").lower()


def bucket_of(client: str, buckets: int) -> int:
    """The bucket of a client id (stable across processes and versions)."""
    return zlib.crc32(client.encode()) % buckets


class ClientKeys(NamedTuple):
    """Where one client's state lives."""

    bucket: str  # the bucket hash (counter-style windows, bans, expiries)
    field_prefix: str  # "<client>|": the start of every field of this client
    usage_base: str  # the start of its bucket's usage keys; ":<YYYYMMDD>" is appended
    own_base: str  # the start of its own-key windows (sliding logs, leases)
    client: str  # the client id (the tag without braces)

    def field(self, window_field: str) -> str:
        """The bucket field of one window of this client."""
        return self.field_prefix + window_field

    def own_key(self, window_field: str) -> str:
        """The sorted set of one sliding-log or concurrency window of this client."""
        return self.own_base + window_field

    def settlement_key(self, settlement: str) -> str:
        """The mark of a settlement of this client that Redis took (adjust.lua), in the client's slot."""
        return f"{self.bucket}:s:{settlement}"


#: Makes a ClientKeys from a tuple of its fields without the NamedTuple's own ``__new__``, a Python function: a
#: call less for every decision that asks Redis.
_make_keys = tuple.__new__


def client_keys(prefix: str, tag: str, buckets: int) -> ClientKeys:
    """The keys and fields of client ``tag`` (a :func:`client_tag`)."""
    # client_id() and bucket_of() written out: two calls less for every decision that asks Redis.
    client = tag.strip("{}")
    if len(client) > _MAX_ID:
        client = client_id(tag)
    hashtag = f"{prefix}:{{b{zlib.crc32(client.encode()) % buckets}}}"
    return _make_keys(ClientKeys, (hashtag, client + "|", hashtag + ":u", f"{hashtag}:l:{client}|", client))


def window_field(limit_id: str, algorithm: str, window: int) -> str:
    """The client-independent name of a window (precomputed per window)."""
    return f"{encode_part(limit_id)}:{Algorithm.named(algorithm).key_tag}{window}"


def is_usage_key(prefix: str, key: str | bytes) -> bool:
    """Whether ``key`` holds usage: a bucket's usage hash of a day (``<prefix>:{b<n>}:u:<YYYYMMDD>``), or
    anything under ``<prefix>:usage:`` (the usage app's own keys, such as the flush mark). Billing data not
    yet copied to the database may be in them."""
    text = key.decode("utf-8", "replace") if isinstance(key, bytes) else key
    if text.startswith(f"{prefix}:usage:"):
        return True
    head = prefix + ":{b"
    if not text.startswith(head):
        return False
    bucket, sep, rest = text[len(head) :].partition("}:u:")
    return bool(sep) and bucket.isdigit() and len(rest) == len("YYYYMMDD") and rest.isdigit()


def multipliers_key(prefix: str) -> str:
    """The adaptive multipliers by plan (JSON, written by the adaptive app, read by every engine)."""
    return f"{prefix}:adaptive:multipliers"


def rules_version_key(prefix: str) -> str:
    """The key whose value changes whenever plans or limits change."""
    return f"{prefix}:rules-version"


#: A client tag as operators write it, the braces left out: ``<kind>.<value>``, the value as
#: :func:`encode_part` made it (kept text, or ``~`` and 24 base32 characters).
_TAG_TEXT = re.compile(r"[a-z]{1,8}\.(?:[A-Za-z0-9._-]{1,64}|~[a-z2-7]{24})")


def is_client_tag(text: str) -> bool:
    """Whether ``text`` (e.g. ``s.12``, ``ip.192.0.2.1``, with or without braces) can be a client tag."""
    return bool(_TAG_TEXT.fullmatch(text[1:-1] if text.startswith("{") and text.endswith("}") else text))


def refusals_key(prefix: str, tag: str) -> str:
    """The list of client ``tag``'s last refusals (see :mod:`quotas.observability.refusals`)."""
    return f"{prefix}:why:{{{tag.strip('{}')}}}"
