"""A test's own HTTP server on a thread, for as long as a block lasts."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from socketserver import BaseServer

#: How often serve_forever looks for shutdown(): its default, half a second, was what each such test waited at
#: its end.
POLL_SECONDS = 0.01


@contextmanager
def served(server: BaseServer) -> Iterator[BaseServer]:
    """Serve on a daemon thread until the block ends; then shut down, close and join."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": POLL_SECONDS}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
