"""The Lua scripts, assembled from the files in ``quotas/lua`` and called by SHA.

``decide.lua`` is the only script on the request path. It is assembled once
per process from the shared helpers and one small file per algorithm, and
called through redis-py's :class:`~redis.commands.core.Script`, which sends
EVALSHA and loads the source only when the server answers NOSCRIPT (after a
restart or a SCRIPT FLUSH).
"""

from __future__ import annotations

from functools import cache
from importlib import resources

#: Wire codes of the algorithms, shared with the Lua files.
ALGORITHM_CODES: dict[str, int] = {
    "fixed_window": 1,
    "sliding_window_log": 2,
    "sliding_window_counter": 3,
    "token_bucket": 4,
    "leaky_bucket": 5,
}

_PARTS = {
    "decide": (
        "common.lua",
        "fixed_window.lua",
        "sliding_window_counter.lua",
        "gcra.lua",
        "sliding_window_log.lua",
        "decide.lua",
    ),
    "refund": ("common.lua", "refund.lua"),
}


@cache
def script_source(name: str) -> str:
    """The assembled source of script ``name`` ("decide" or "refund")."""
    folder = resources.files("quotas") / "lua"
    return "\n".join(folder.joinpath(part).read_text(encoding="utf-8") for part in _PARTS[name])
