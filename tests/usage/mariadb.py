"""A throwaway database on a real MariaDB (or MySQL) server, and project processes that use it.

The server is ``MARIADB_URL`` (default ``mysql://root@127.0.0.1:3306``, the machine's MariaDB). A
test module makes its own database ``quota_test_<random>`` there with the server's user, migrates
it with the project's migrations and drops it at the end. The test session keeps its own database
(SQLite or PostgreSQL); the flush runs in a project process whose ``DATABASE_URL`` is the MariaDB
database (:mod:`tests.usage.db_process`), as a Celery worker of a project on MariaDB would.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from typing import Any
from urllib.parse import unquote, urlsplit

from .processes import ROOT, process_env

SERVER_URL = os.environ.get("MARIADB_URL") or "mysql://root@127.0.0.1:3306"


class Unavailable(Exception):
    """No driver, or no server to reach: the test is skipped, or failed under QUOTAS_REQUIRE_SERVICES=1."""


class MariaDB:
    """A database of its own on the server at ``server_url``: :meth:`create`, use, :meth:`drop`."""

    def __init__(self, server_url: str = SERVER_URL) -> None:
        self.server_url = server_url.rstrip("/")
        self.name = f"quota_test_{secrets.token_hex(4)}"

    def _connect(self) -> Any:
        try:
            import pymysql  # pure Python (requirements-dev.txt); config.settings gives it to Django as MySQLdb
        except ImportError as exc:
            raise Unavailable(f"needs the PyMySQL driver (pip install -r requirements-dev.txt): {exc}") from exc
        url = urlsplit(self.server_url)
        try:
            return pymysql.connect(
                host=url.hostname or "127.0.0.1",
                port=url.port or 3306,
                user=unquote(url.username or "root"),
                password=unquote(url.password or ""),
                connect_timeout=5,
            )
        except pymysql.OperationalError as exc:
            raise Unavailable(f"needs MariaDB or MySQL at {self.server_url} (set MARIADB_URL): {exc}") from exc

    def create(self) -> MariaDB:
        server = self._connect()
        try:
            server.cursor().execute(f"CREATE DATABASE `{self.name}` CHARACTER SET utf8mb4")
        finally:
            server.close()
        return self

    def drop(self) -> None:
        server = self._connect()
        try:
            server.cursor().execute(f"DROP DATABASE IF EXISTS `{self.name}`")
        finally:
            server.close()

    def env(self) -> dict[str, str]:
        """What selects this database in a process started with config.settings."""
        return {"DATABASE_URL": f"{self.server_url}/{self.name}"}

    def run(self, redis_url: str, *command: str) -> dict[str, Any]:
        """Run a :mod:`tests.usage.db_process` command on this database and ``redis_url``; returns its JSON."""
        done = subprocess.run(
            [sys.executable, "-m", "tests.usage.db_process", *command],
            cwd=ROOT,
            env=process_env(redis_url, self),
            capture_output=True,
            timeout=120,
            check=False,
        )
        out = done.stdout.decode()
        assert done.returncode == 0, f"{' '.join(command)} failed on MariaDB:\n{done.stderr.decode()[-4000:]}"
        return json.loads(out.strip().splitlines()[-1])
