"""What the store sends on: Redis clients built from a URL (``connect``), or the memory store (``memory``)."""
