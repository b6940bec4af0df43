"""How many Lua calls (FCALL or EVALSHA) a Redis server ran: one per decision that reached it."""

from __future__ import annotations

from typing import Any


def script_calls(client: Any) -> int:
    """FCALL plus EVALSHA calls in ``client``'s server's commandstats (since the last CONFIG RESETSTAT)."""
    stats = client.info("commandstats")
    return sum(int(stats.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in ("fcall", "evalsha"))
