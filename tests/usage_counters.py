"""Reading the decision script's raw usage counters in tests."""

from __future__ import annotations


def usage_totals(redis_client) -> dict[str, int]:
    """Every usage counter in Redis summed by its name ("a", "dr", "da", ...), over all clients and days."""
    totals: dict[str, int] = {}
    for key in list(redis_client.scan_iter(match="*:u:*")):
        for name, value in redis_client.hgetall(key).items():
            if name.startswith(b"~"):
                continue  # bookkeeping (the hash's generation, writers' batch marks), not a counter
            counter = name.decode().rsplit("|", 1)[1]
            totals[counter] = totals.get(counter, 0) + int(value)
    return totals
