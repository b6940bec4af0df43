"""Rate strings and Redis key encoding."""

from __future__ import annotations

import pytest

from quotas.contract.keys import bucket_of, client_id, client_keys, client_tag, encode_part, window_field
from quotas.exceptions import InvalidRate
from quotas.formats.rates import Rate, parse_rates


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("10/s", (Rate(10, 1),)),
        ("100/min; 10/s", (Rate(10, 1), Rate(100, 60))),
        ("5000/day", (Rate(5000, 86400),)),
        ("100/15min", (Rate(100, 900),)),
        ("3/hours, 1/week", (Rate(3, 3600), Rate(1, 604800))),
        (" 7 / 2h ", (Rate(7, 7200),)),
    ],
)
def test_valid_rates(text, expected):
    assert parse_rates(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "at least one rate"),
        ("0/s", "at least 1"),
        ("10/fortnight", "Unknown time unit"),
        ("ten per second", "is not a rate"),
        ("-1/s", "is not a rate"),
        ("10/0min", "at least 1"),
        ("1/s; 2/sec", "share the window"),
        ("5/400day", "longer than 366 days"),
    ],
)
def test_invalid_rates_say_what_is_wrong(text, message):
    with pytest.raises(InvalidRate, match=message):
        parse_rates(text)


@pytest.mark.parametrize("hostile", ["a:b", "a{b}c", "}{", "x" * 500, "ключ", "\x00\xff", "with space"])
def test_client_text_cannot_break_out_of_its_key(hostile):
    """No client input puts braces or colons into a key, or makes it unbounded."""
    part = encode_part(hostile)
    assert not set(part) & set("{}: ")
    assert len(part) <= 64
    tag = client_tag("ip", hostile)
    assert tag.count("{") == 1
    assert tag.count("}") == 1
    for algorithm in ("token_bucket", "sliding_window_log"):
        keys, name = client_keys("quota:v1", tag, 4096), window_field(hostile, algorithm, 60)
        key, field = (keys.own_key(name), "") if algorithm == "sliding_window_log" else (keys.bucket, keys.field(name))
        assert key.count("{") == 1
        assert key.index("{") < key.index("}")
        assert len(key) < 150
        # One '|' between the client and its window: a field can be told apart from another client's.
        assert (field or key.split(":l:", 1)[1]).count("|") == 1
    keys = client_keys("quota:v1", tag, 4096)
    # Small enough for Redis's packed small-hash encoding (64-byte fields by default).
    assert len(keys.field(window_field("x" * 20, "token_bucket", 86400))) <= 64


def test_distinct_inputs_stay_distinct():
    values = ["a:b", "a;b", "a{b", "ab", "AB", "x" * 65, "x" * 66]
    assert len({encode_part(v) for v in values}) == len(values)


def test_bytes_that_are_not_utf8_are_encoded():
    assert encode_part(b"\xff\xfe").startswith("~")


def test_clients_spread_over_buckets_that_share_their_keys_slot():
    """A client's bucket, usage and log keys carry one hash tag: the bucket's."""
    keys = client_keys("quota:v1", "{ip.203.0.113.9}", 4096)
    assert keys.client == "ip.203.0.113.9"
    tags = {k[k.index("{") : k.index("}") + 1] for k in (keys.bucket, keys.usage_base, keys.own_key("a:sl60"))}
    assert tags == {f"{{b{bucket_of('ip.203.0.113.9', 4096)}}}"}
    used = {bucket_of(client_id(client_tag("ip", f"10.0.{i >> 8}.{i & 255}")), 64) for i in range(5000)}
    assert len(used) == 64  # CRC32 reaches every bucket


def test_long_client_ids_are_hashed_to_a_bounded_length():
    long_tag = client_tag("key", "k" * 64)
    assert len(client_id(long_tag)) <= 40
    assert client_id(long_tag) != client_id(client_tag("key", "k" * 63))


@pytest.mark.parametrize(
    ("kind", "value"),
    [
        ("u", "12"),
        ("u", "0" * 64),
        ("u", "1" * 65),
        ("u", "١٢"),
        ("ip", "203.0.113.9"),
        ("key", "k" * 80),
        ("s", b"\xff"),
    ],
)
def test_the_written_out_key_parts_are_the_named_ones(kind, value):
    """client_tag and client_keys, which write encode_part's, client_id's and bucket_of's common cases out, name
    every client as those functions do."""
    tag = client_tag(kind, value)
    assert tag == "{" + kind + "." + encode_part(value) + "}"
    keys = client_keys("quota:v1", tag, 1024)
    assert keys.client == client_id(tag)
    assert keys.bucket == f"quota:v1:{{b{bucket_of(client_id(tag), 1024)}}}"
