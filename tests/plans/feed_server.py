"""A real HTTP server for feed tests: ``http.server`` on an ephemeral loopback port, in a thread, serving a folder."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.serving import served


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass  # the test's output is the assertions', not the server's access log


@contextmanager
def serving(folder: Path) -> Iterator[str]:
    """Serve ``folder`` over HTTP until the block ends; yields the base URL (``http://127.0.0.1:PORT/``)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(folder)))
    with served(server):
        yield f"http://127.0.0.1:{server.server_address[1]}/"
