"""A deployment's settings pass ``manage.py check --deploy``; `make run`'s plain HTTP is tested in test_run.py."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from config.run import PLAIN_HTTP

BASE_DIR = Path(__file__).resolve().parent.parent

#: Each test starts manage.py (or the settings module) in a process of its own, with a deployment's environment.
pytestmark = pytest.mark.slow

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
    ("header", "requests"),
    [
        ("", [("https", 301)]),  # no proxy configured: a client's own X-Forwarded-Proto is not believed
        ("X-Forwarded-Proto", [("http", 301), ("https", 200)]),
        ("X-Forwarded-Ssl=on", [("on", 200)]),
    ],
    ids=["no-proxy-header", "X-Forwarded-Proto", "X-Forwarded-Ssl=on"],
)
def test_plain_http_is_redirected_unless_the_configured_proxy_says_https(tmp_path, redis_server, header, requests):
    """GET /healthz with DEBUG off: 301 to https://, but 200 when SECURE_PROXY_SSL_HEADER's header says HTTPS.

    One process per configured header (the setting is read at start-up), asking once for each value the proxy
    may send."""
    name = (header or "X-Forwarded-Proto").partition("=")[0]
    meta = "HTTP_" + name.upper().replace("-", "_")
    code = "from django.test import Client\n"
    for proxy_says, _ in requests:
        code += f"response = Client().get('/healthz', **{{{meta!r}: {proxy_says!r}}})\n"
        code += "print(response.status_code, response.get('Location', ''))\n"
    variables = {"SECRET_KEY": PRODUCTION["SECRET_KEY"], "REDIS_URL": redis_server.url}
    if header:
        variables["SECURE_PROXY_SSL_HEADER"] = header
    result = manage(["shell", "-c", code], tmp_path, **variables)
    assert result.returncode == 0, result.stderr
    answers = result.stdout.strip().splitlines()[-len(requests) :]
    for (proxy_says, expected), answer in zip(requests, answers, strict=True):
        status, _, location = answer.partition(" ")
        assert int(status) == expected, (proxy_says, answer)
        if expected == 301:
            assert location == "https://testserver/healthz", (proxy_says, answer)


def test_a_malformed_proxy_header_refuses_to_start(tmp_path):
    result = manage(["check"], tmp_path, SECRET_KEY=PRODUCTION["SECRET_KEY"], SECURE_PROXY_SSL_HEADER="X Proto: https")
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert "SECURE_PROXY_SSL_HEADER" in result.stderr


def test_the_memory_store_with_debug_off_is_a_start_up_error_unless_a_setting_allows_it(tmp_path):
    """REDIS_URL memory:// and DEBUG off: `manage.py check` (and every command that checks) fails with
    quotas.E091; DEBUG on, or QUOTAS['ALLOW_MEMORY_STORE_IN_PRODUCTION'], lets it start."""
    key = PRODUCTION["SECRET_KEY"]
    refused = manage(["check"], tmp_path, SECRET_KEY=key, REDIS_URL="memory://")
    assert refused.returncode == 1
    assert "quotas.E091" in refused.stderr
    assert "ALLOW_MEMORY_STORE_IN_PRODUCTION" in refused.stderr
    allowed = manage(["check"], tmp_path, SECRET_KEY=key, REDIS_URL="memory://", DEBUG="true")
    assert allowed.returncode == 0, allowed.stderr
    said_so = manage(
        ["check"], tmp_path, SECRET_KEY=key, REDIS_URL="memory://", QUOTAS_ALLOW_MEMORY_STORE_IN_PRODUCTION="true"
    )
    assert said_so.returncode == 0, said_so.stderr


#: Prints ``CELERY_BROKER_URL`` as the project's settings module makes it under each environment given (a JSON
#: list of variables to set), one line each: the module read afresh for each, as a process starting with those
#: variables reads it, in one process.
BROKER_OF_EACH = """
import json, os, runpy, sys
base = dict(os.environ)
for variables in json.loads(sys.argv[1]):
    os.environ.clear()
    os.environ.update({**base, **variables})
    print(runpy.run_module("config.settings")["CELERY_BROKER_URL"])
"""


def test_the_celery_broker_never_follows_redis_url_to_an_in_process_transport(tmp_path):
    """With REDIS_URL memory:// the demo's broker is still a Redis (kombu's memory:// would keep beat's tasks in
    beat's own process); any other REDIS_URL is the broker too, and CELERY_BROKER_URL wins."""
    key = PRODUCTION["SECRET_KEY"]
    cases = [
        {"SECRET_KEY": key, "REDIS_URL": "memory://", "DEBUG": "true"},
        {"SECRET_KEY": key, "REDIS_URL": "redis://10.0.0.5:6379/2", "DEBUG": "true"},
        {"SECRET_KEY": key, "REDIS_URL": "memory://", "CELERY_BROKER_URL": "amqp://mq//", "DEBUG": "true"},
    ]
    env = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "DATABASE_URL", "CELERY_BROKER_URL")}
    env.update(RUN_DIR=str(tmp_path / "run"), SQLITE_PATH=str(tmp_path / "db.sqlite3"))
    result = subprocess.run(
        [sys.executable, "-c", BROKER_OF_EACH, json.dumps(cases)],
        cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    on_memory, on_redis, chosen = result.stdout.strip().splitlines()[-3:]
    assert on_memory == "redis://127.0.0.1:6379/0"
    assert on_redis == "redis://10.0.0.5:6379/2"
    assert chosen == "amqp://mq//"
