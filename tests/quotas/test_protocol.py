"""quotas.protocol owns the contract with the scripts: Lua and Python agree on every algorithm code."""

from __future__ import annotations

import re

import pytest

from quotas.conf import ALGORITHMS
from quotas.keys import window_field
from quotas.protocol import ALGORITHM_CODES, Algorithm, lua_constants
from quotas.scripts import _PARTS, script_source


def test_lua_sees_every_algorithm_code_python_sends(redis_client):
    """The generated constants, run by Redis itself, give each algorithm the code Python packs into specs."""
    names = [a.name for a in Algorithm]
    lua = lua_constants() + "return {" + ", ".join(names) + "}"
    assert redis_client.eval(lua, 0) == [int(a) for a in Algorithm]
    assert {a.name.lower(): int(a) for a in Algorithm} == ALGORITHM_CODES


@pytest.mark.parametrize("name", sorted(_PARTS))
def test_every_script_starts_with_the_generated_constants_and_uses_no_bare_code(name):
    source = script_source(name)
    assert source.startswith(lua_constants())
    body = source[len(lua_constants()) :]
    assert not re.search(r"\bcode\s*(==|~=|<=|>=|<|>)\s*\d", body)  # algorithms by name only
    assert not re.search(r"ALGORITHMS\[\d\]", body)


def test_settings_algorithms_and_key_tags_come_from_the_protocol():
    assert set(ALGORITHMS) <= set(ALGORITHM_CODES)
    tags = {a.key_tag for a in Algorithm}
    assert len(tags) == len(Algorithm)  # each algorithm's state has a name of its own
    assert window_field("l1", "token_bucket", 60) == "l1:tb60"
