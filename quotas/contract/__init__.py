"""What the engine and its store share, below everything else: the Python/Lua protocol (``protocol``), the key
layout (``keys``), the Lua library (``library``, ``lua/``), and the clients that reach a store from one URL
(``connect``: Redis, Sentinel, Cluster; ``memory``: the memory store)."""
