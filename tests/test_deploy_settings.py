"""A deployment's settings pass ``manage.py check --deploy``; `make run`'s plain HTTP is tested in test_run.py."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from config.run import PLAIN_HTTP

BASE_DIR = Path(__file__).resolve().parent.parent

#: What "Deployment settings" (docs/security.md) tells a deployment to set (besides its database and Redis).
PRODUCTION = {
    "SECRET_KEY": secrets.token_urlsafe(50),
    "ALLOWED_HOSTS": "api.example.com",
    "SECURE_HSTS_SECONDS": "31536000",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS": "true",
    "SECURE_HSTS_PRELOAD": "true",
}
#: Everything the settings read about HTTPS: a test starts from none of them.
HTTPS_VARIABLES = (*PLAIN_HTTP, "SECURE_PROXY_SSL_HEADER", *(k for k in PRODUCTION if k.startswith("SECURE_HSTS")))


def manage(args: list[str], tmp_path: Path, **variables: str) -> subprocess.CompletedProcess:
    """``manage.py args`` with DEBUG off, a throwaway run directory and SQLite file, and ``variables``."""
    env = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "DATABASE_URL", *HTTPS_VARIABLES)}
    env.update(RUN_DIR=str(tmp_path / "run"), SQLITE_PATH=str(tmp_path / "db.sqlite3"), **variables)
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=60
    )


def test_the_documented_production_environment_passes_check_deploy(tmp_path):
    """DEBUG off and the documented production variables: not even a warning."""
    result = manage(["check", "--deploy", "--fail-level", "WARNING"], tmp_path, **PRODUCTION)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_with_debug_off_https_is_the_default_and_only_hsts_waits_for_the_operator(tmp_path):
    """Redirect and secure cookies need no variable; HSTS (hard to take back) is the one left to set."""
    result = manage(["check", "--deploy"], tmp_path, SECRET_KEY=PRODUCTION["SECRET_KEY"])
    assert result.returncode == 0, result.stderr
    reported = result.stdout + result.stderr
    assert "security.W004" in reported
    for redirect_or_cookie in ("security.W008", "security.W012", "security.W016"):
        assert redirect_or_cookie not in reported


@pytest.mark.parametrize(
    ("header", "proxy_says", "expected"),
    [
        ("", "https", 301),  # no proxy configured: a client's own X-Forwarded-Proto is not believed
        ("X-Forwarded-Proto", "http", 301),
        ("X-Forwarded-Proto", "https", 200),
        ("X-Forwarded-Ssl=on", "on", 200),
    ],
)
def test_plain_http_is_redirected_unless_the_configured_proxy_says_https(
    tmp_path, redis_server, header, proxy_says, expected
):
    """GET /healthz with DEBUG off: 301 to https://, but 200 when SECURE_PROXY_SSL_HEADER's header says HTTPS."""
    name = (header or "X-Forwarded-Proto").partition("=")[0]
    meta = "HTTP_" + name.upper().replace("-", "_")
    code = (
        "from django.test import Client\n"
        f"response = Client().get('/healthz', **{{{meta!r}: {proxy_says!r}}})\n"
        "print(response.status_code, response.get('Location', ''))\n"
    )
    variables = {"SECRET_KEY": PRODUCTION["SECRET_KEY"], "REDIS_URL": redis_server.url}
    if header:
        variables["SECURE_PROXY_SSL_HEADER"] = header
    result = manage(["shell", "-c", code], tmp_path, **variables)
    assert result.returncode == 0, result.stderr
    status, _, location = result.stdout.strip().splitlines()[-1].partition(" ")
    assert int(status) == expected
    if expected == 301:
        assert location == "https://testserver/healthz"


def test_a_malformed_proxy_header_refuses_to_start(tmp_path):
    result = manage(["check"], tmp_path, SECRET_KEY=PRODUCTION["SECRET_KEY"], SECURE_PROXY_SSL_HEADER="X Proto: https")
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert "SECURE_PROXY_SSL_HEADER" in result.stderr
