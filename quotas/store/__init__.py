"""The decision engine: the Python<->Lua protocol, keys, the Lua scripts, the Redis connection and
what one process keeps (decisions, deny memory, local fallback, buffered usage)."""
