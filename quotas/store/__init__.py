"""Redis, and what guards it.

``transport`` sends the Lua library's entry points (sync and asyncio);
``redis_store`` encodes each operation for them and decodes the replies;
``guard`` puts a memory of refused clients, a circuit breaker and the local
fallback in front. ``protocol`` and ``keys`` own the formats Python and Lua
share; ``connect`` builds the client from one URL.
"""
