"""Rate strings and Redis key encoding."""

from __future__ import annotations

import pytest

from quotas.exceptions import InvalidRate
from quotas.keys import client_tag, encode_part, window_key
from quotas.rates import Rate, parse_rates


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
    key = window_key("quota:v1", tag, hostile, "token_bucket", 60)
    assert key.index("{") < key.index("}")
    assert len(key) < 150


def test_distinct_inputs_stay_distinct():
    values = ["a:b", "a;b", "a{b", "ab", "AB", "x" * 65, "x" * 66]
    assert len({encode_part(v) for v in values}) == len(values)


def test_bytes_that_are_not_utf8_are_encoded():
    assert encode_part(b"\xff\xfe").startswith("~")
