"""The Lua library, assembled from the files in ``quotas/contract/lua``, in its two forms.

One source, two thin wrappers (both built here and nowhere else):

* **a Redis 7 function library** (:func:`library_source`): every part once,
  then ``redis.register_function`` for each entry point. FUNCTION LOAD runs the
  parts once per server; each FCALL then runs only the entry point. The
  library's name carries a hash of its code (``quotas_<hash>``), and so does
  every function's, so processes running two releases side by side each call
  their own code, and loading it again (REPLACE) only ever replaces a library
  with itself.
* **an EVAL script per entry point** (:func:`script_source`), for Redis 6.2:
  the parts that entry point needs, then ``return <entry>(KEYS, ARGV)``. EVALSHA
  runs the whole chunk on every call, so each script carries only what its
  entry point uses.

Each part defines ``local`` functions that the parts after it may use; the
contract's constants that the parts still read by name (:func:`header`) come first.
The parts name the contract's numbers (``DECIDE_ARG_NOW``, ``REPLY_HEAD``); both
forms carry them as literals (:func:`part`), because a constant a function
reads is an upvalue it captures, and Redis 6.2 defines every function of the
EVAL form on every call: capturing the contract's ~80 constants cost 61k of the
284k instructions a 1-limit decision took inside Redis 6.2 (1.7k of 138k on
Redis 7, where the library is defined once; bench section 14).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from functools import cache
from importlib import resources
from typing import Any, Protocol

from quotas.contract.protocol import lua_constants

#: Every part of the library, in the order they are concatenated.
PARTS = (
    "common.lua",
    "fixed_window.lua",
    "sliding_window_counter.lua",
    "gcra.lua",
    "period.lua",
    "sliding_window_log.lua",
    "concurrency.lua",
    "ban.lua",
    "usage.lua",
    "bucket.lua",
    "decide.lua",
    "levels.lua",
    "refund.lua",
    "adjust.lua",
    "release.lua",
    "usage_add.lua",
    "history_top.lua",
)

#: Each entry point (a ``local function <name>(keys, args)`` of the part named after it) and the parts it uses.
ENTRY_POINTS: dict[str, tuple[str, ...]] = {
    "decide": PARTS[: PARTS.index("decide.lua") + 1],
    "refund": ("common.lua", "period.lua", "levels.lua", "refund.lua"),
    "adjust": ("common.lua", "period.lua", "usage.lua", "levels.lua", "adjust.lua"),
    "release": ("release.lua",),
    "usage_add": ("usage.lua", "usage_add.lua"),
    "history_top": ("history_top.lua",),
}


@cache
def _literals() -> dict[str, str]:
    """Each number and string the contract names in :func:`lua_constants` (``local NAME = <value>``, and the
    usage counters as ``COUNTER.NAME``), as a Lua literal."""
    constants = lua_constants()
    found = dict(re.findall(r"^local ([A-Z][A-Z0-9_]*) = (-?\d+|'[^']*')(?:  -- .*)?$", constants, re.MULTILINE))
    literals = {name: f"({value})" if value.startswith("-") else value for name, value in found.items()}
    counters = re.search(r"^local COUNTER = \{(.*)\}", constants, re.MULTILINE)
    assert counters is not None, "lua_constants() defines COUNTER"
    literals |= {f"COUNTER.{k}": v for k, v in re.findall(r"(\w+) = ('[^']*')", counters.group(1))}
    # The parts' own named values (``local EPSILON = 1`` at a part's top level) too: on Redis 6.2 each function
    # reading one captured it on every call (9k of a 1-limit decision's 194k instructions, bench section 14).
    for name in PARTS:
        for constant, value in _OWN_CONSTANT.findall(source(name)):
            assert constant not in literals, f"{constant} is named twice"
            literals[constant] = f"({value})" if value.startswith("-") else value
    return literals


#: A part's own named value at its top level: its definition stays (no code reads it once uses are literals).
_OWN_CONSTANT = re.compile(r"^local ([A-Z][A-Z0-9_]*) = (-?\d+|'[^']*') *(?:--.*)?$", re.MULTILINE)


@cache
def source(name: str) -> str:
    """Part ``name``'s text, as written (what the contract's tests read)."""
    return (resources.files("quotas.contract") / "lua" / name).read_text(encoding="utf-8")


@cache
def part(name: str) -> str:
    """Part ``name`` as the library carries it: its text, each of the contract's and the parts' own named values
    as a literal (a name inside a string literal too: the parts quote none, and tests/quotas/test_library.py
    checks the result)."""
    literals = _literals()

    def written_in(line: str) -> str:
        if _OWN_CONSTANT.match(line):
            return line  # a definition: its name stays
        return re.sub(r"\b(?:COUNTER\.)?[A-Z][A-Z0-9_]*\b", lambda m: literals.get(m.group(0), m.group(0)), line)

    return "\n".join(map(written_in, source(name).split("\n")))


@cache
def header(parts: tuple[str, ...]) -> str:
    """The definitions of :func:`lua_constants` that ``parts`` (as :func:`part` makes them) still read by name:
    the tables and the codes they are made of. The EVAL form runs its header on every call, and on Redis 6.2 the
    62 others (the usage counters' table among them, read by no code once its names are literals) cost 7k of a
    1-limit decision's 198k instructions (bench section 14)."""
    needed = "\n".join(map(part, parts))
    kept = []
    for line in reversed(lua_constants().splitlines()):  # a later definition may read an earlier one's name
        defined = re.match(r"local ([A-Z][A-Z0-9_]*) = ", line)
        if defined is None or re.search(rf"\b{defined.group(1)}\b", needed):
            kept.append(line)
            needed += "\n" + line
    return "\n".join(reversed(kept)) + "\n"


@cache
def script_source(entry: str) -> str:
    """The EVAL form of ``entry`` ("decide", "refund", ...): the parts it uses, then the call."""
    parts = ENTRY_POINTS[entry]
    return "\n".join([header(parts), *map(part, parts), f"return {entry}(KEYS, ARGV)\n"])


@cache
def library_name() -> str:
    """``quotas_<hash of the library's code>``: a new release's library never replaces an older one."""
    body = "\n".join([lua_constants(), *map(part, PARTS)])
    return "quotas_" + hashlib.sha1(body.encode("utf-8")).hexdigest()[:16]


def function_name(entry: str) -> str:
    """The name ``entry`` is registered under in :func:`library_source` (function names are server-wide)."""
    return f"{library_name()}_{entry}"


@cache
def library_source() -> str:
    """The function library form, for FUNCTION LOAD (Redis 7+)."""
    registrations = [f"redis.register_function('{function_name(e)}', {e})" for e in ENTRY_POINTS]
    return "\n".join([f"#!lua name={library_name()}", header(PARTS), *map(part, PARTS), *registrations, ""])


class LibraryCaller(Protocol):
    """What the store calls the library's entry points through: Redis (:class:`quotas.store.transport.Transport`)
    or this process (:class:`quotas.store.backends.memory.MemoryTransport`). It hands out no client: the store is
    given the one it sends on where both are opened (:func:`quotas.store.opening.open_store`)."""

    def call(self, entry: str, keys: Sequence[str], args: Sequence[object]) -> Any:
        """Run entry point ``entry`` with ``keys`` and ``args``; the client's errors propagate."""
        ...

    def script(self, entry: str) -> Any:
        """Entry point ``entry`` itself: ``script(keys, args)`` is ``call(entry, keys, args)``."""
        ...

    async def acall(self, entry: str, keys: Sequence[str], args: Sequence[object]) -> Any:
        """:meth:`call`, from asyncio."""
        ...

    def close(self) -> None:
        """Drop the sync client's connections."""
        ...

    async def aclose(self) -> None:
        """Close this event loop's client."""
        ...
