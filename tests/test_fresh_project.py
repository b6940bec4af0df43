"""What a new user does: install the wheel into a fresh virtualenv, start a project, paste Getting started's lines.

The wheel, the one a release publishes (``python -m build`` from the sdist of
a clean copy of this checkout: tests/dists.py), is installed with its dependencies
from the package registry into a virtualenv of its own; ``django-admin
startproject`` makes a project there, and the lines of the documentation's
"Getting started" page are appended verbatim (read from docs/getting-started.md
between their ``<!-- fresh-project-...:start/end -->`` markers, so the page
stays what this test runs). Everything then runs with that virtualenv's
python: system checks, migrations, DRF's rates refusing with RateLimit
headers, every page and action of the plans admin, and the usage API. The
only lines the test adds are its own: the session's Redis, a small DRF view,
and a low anonymous rate so a few requests reach it.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from config.embedded_redis import RedisServer, free_port
from tests.conftest import skip_or_fail
from tests.doc_blocks import doc_block
from tests.notifications import conftest as notification_fixtures
from tests.notifications.conftest import Receiver
from tests.notifications.test_webhooks import documented_verifier
from tests.process_groups import stop_groups
from tests.session_files import built_once, locked, shared

#: Slow, and longer than the suite's 120 s per test: the first one builds the wheel and installs it. The wheel and
#: the virtualenvs are built once per session and shared by every xdist worker (see :func:`built_once`), so the
#: module's tests spread over the workers like any others.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

ROOT = Path(__file__).resolve().parent.parent
#: The page a new user follows; its snippets are pasted into the fresh project.
GETTING_STARTED = ROOT / "docs" / "getting-started.md"
#: The page that mounts the platform's views in a project.
OPERATIONS = ROOT / "docs" / "operations.md"
PROBE = Path(__file__).with_name("fresh_project_probe.py")
APPS = ("quotas", "plans", "usage", "adaptive", "dashboard", "notifications", "console")
#: Generous: a cold pip cache downloads Django, DRF and redis-py (the bare wheel: no hiredis, which is an extra).
PIP_TIMEOUT = 900
#: The installs this module makes itself skip pip's byte-compiling of every installed module (Django's thousand
#: and more, in each virtualenv): it changes nothing a test checks, Python compiles what is imported when it is
#: imported, and it is most of an install's time once the registry's files are in pip's cache. The page's own
#: ``pip install`` lines run as written.
NO_COMPILE = "--no-compile"
#: pip's words for a registry it could not reach, as opposed to dependencies that do not resolve.
UNREACHABLE = re.compile(
    r"NewConnectionError|Max retries exceeded|Temporary failure in name resolution|Network is unreachable|"
    r"ConnectTimeout|ReadTimeout|ProxyError|Connection refused|SSLError"
)


def wait_for_room_in_the_minute(needed: float) -> None:
    """Sleep, if needed, so that the next ``needed`` seconds lie in one minute of the epoch.

    The fresh project's own runserver and gunicorn decide on the session's redis-server, whose clock no test can
    move (the memory store's clock is in-process only): requests that straddle a minute's edge of the documented
    "3/min" would legitimately get a second quota.
    """
    left = 60 - time.time() % 60
    if left < needed:
        time.sleep(left + 0.05)  # a real process's real clock: see above


#: The fresh project's own lines, appended after the page's: the session's Redis, and a rate that a few
#: requests reach (the page's 60/min would need 61).
TEST_SETTINGS = """
# --- added by tests/test_fresh_project.py, not from the docs ---
QUOTAS["REDIS_URL"] = {redis_url!r}
REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"] = {{**REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "anon": "3/min"}}
"""
PING_VIEW = '''"""A DRF view of the fresh project: what the throttle protects."""

from rest_framework.decorators import api_view
from rest_framework.response import Response


@api_view(["GET"])
def ping(request):
    return Response({"pong": True})
'''
TEST_URLS = """
# --- added by tests/test_fresh_project.py, not from the docs ---
from django.urls import path as _path  # noqa: E402

from fresh.ping import ping  # noqa: E402

urlpatterns += [_path("api/ping", ping)]
"""

#: Apps of the fresh project's own, in its package ``shop``, labelled ``plans`` and ``usage`` as Django labels
#: ``shop.plans`` and ``shop.usage`` by default: the labels ours had before their ``quota_`` prefix. Each has
#: a model named like one of ours (so also the table ours had then) and an admin page.
OWN_APPS = ("plans", "usage")
OWN_APP_MODULES = {
    "apps.py": """from django.apps import AppConfig


class Config(AppConfig):
    name = "shop.{label}"
    default_auto_field = "django.db.models.BigAutoField"
""",
    "models.py": """from django.db import models


class {model}(models.Model):
    name = models.CharField(max_length=50)
""",
    "admin.py": """from django.contrib import admin

from .models import {model}

admin.site.register({model})
""",
}
OWN_MODELS = {"plans": "Plan", "usage": "UsageRecord"}
OWN_SETTINGS = """
# --- added by tests/test_fresh_project.py, not from the docs: the project's own plans and usage apps ---
INSTALLED_APPS += ["shop.plans", "shop.usage"]
"""


def clean_env(venv: Path | None = None, **extra: str) -> dict[str, str]:
    """The environment of a shell a user opens: none of this suite's DJANGO_SETTINGS_MODULE, PYTHONPATH or
    SECRET_KEY (the project must work with what startproject and the wheel give it); pip's settings kept."""
    kept = {"PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE"}
    env = {k: v for k, v in os.environ.items() if k in kept or k.startswith(("PIP_", "http_", "https_", "HTTP"))}
    if venv is not None:
        env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["VIRTUAL_ENV"] = str(venv)
    return {**env, **extra}


def run(args: list[str | Path], cwd: Path, timeout: float, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def pip_failed(what: str, result: subprocess.CompletedProcess[str]) -> None:
    """A registry pip could not reach skips (fails under QUOTAS_REQUIRE_SERVICES=1); anything else fails."""
    output = result.stdout[-3000:] + result.stderr[-5000:]
    if UNREACHABLE.search(output):
        skip_or_fail(f"{what}: pip could not reach the package registry (or its cache):\n{output}")
    pytest.fail(f"{what} failed (exit {result.returncode}):\n{output}")


@pytest.fixture(scope="session")
def wheel(dists: tuple[Path, Path]) -> Path:
    """The wheel a release publishes: built from the sdist of a clean copy of this checkout (tests/dists.py),
    the session's one, which tests/test_packaging.py looks into."""
    return dists[1]


def new_venv(tmp_path_factory: pytest.TempPathFactory, name: str, requirement: str) -> Path:
    """The session's virtualenv ``name`` with ``requirement`` (the wheel, its extras) and its dependencies
    installed from the registry; made once for every worker."""
    directory = shared(tmp_path_factory, "fresh-project", name)
    venv = directory / "env"
    with built_once(directory) as building:
        if building:
            # Without ensurepip, whose pip and setuptools install byte-compiles every module of both (about 4.5 s
            # of CPU a virtualenv, measured 2026-11-29): this suite's pip installs pip there along with the
            # requirement, in one resolution, skipping that as every install here does (NO_COMPILE). The page's
            # ``pip install`` lines then run with that pip, first on PATH, as a user's do.
            created = run([sys.executable, "-m", "venv", "--without-pip", venv], directory, 300, clean_env())
            assert created.returncode == 0, created.stderr
            installed = run([sys.executable, "-m", "pip", "--python", venv / "bin/python", "install", NO_COMPILE,
                             "pip", requirement], directory, PIP_TIMEOUT, clean_env(venv))  # fmt: skip
            if installed.returncode != 0:
                pip_failed(f"pip install {Path(requirement).name}", installed)
    return venv


@pytest.fixture(scope="session")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtualenv with the wheel and its dependencies installed from the registry."""
    return new_venv(tmp_path_factory, "venv", str(wheel))


@pytest.fixture(scope="session")
def venv_adaptive(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtualenv with the wheel and its ``[adaptive]`` extra (celery, psutil), as the Operations page asks
    for the dashboard."""
    return new_venv(tmp_path_factory, "venv-adaptive", f"{wheel}[adaptive]")


@dataclass
class Project:
    """A project made by ``django-admin startproject fresh`` in the fresh virtualenv."""

    venv: Path
    path: Path

    def env(self) -> dict[str, str]:
        return clean_env(self.venv, DJANGO_SETTINGS_MODULE="fresh.settings")

    def manage(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return run([self.venv / "bin/python", "manage.py", *args], self.path, timeout, self.env())

    def probe(self, name: str) -> dict[str, Any]:
        """Run tests/fresh_project_probe.py's ``name`` with the virtualenv's python; its JSON answer."""
        result = run([self.venv / "bin/python", self.path / PROBE.name, name], self.path, 300, self.env())
        assert result.returncode == 0, f"probe {name} failed:\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
        return json.loads(result.stdout.strip().splitlines()[-1])

    def append(self, relative: str, text: str) -> None:
        with (self.path / relative).open("a", encoding="utf-8") as file:
            file.write("\n" + text)

    def ok(self, *args: str) -> str:
        """``manage.py`` with ``args``, which must succeed; its output."""
        result = self.manage(*args)
        assert result.returncode == 0, f"manage.py {' '.join(args)}:\n{result.stdout}{result.stderr}"
        return result.stdout

    def add_celery(self) -> None:
        """The Operations page's Celery app, its import in the package and its settings (``fresh`` for
        ``mysite``)."""
        (self.path / "fresh/celery.py").write_text(doc_block(OPERATIONS, "celery-app").replace("mysite", "fresh"))
        self.append("fresh/__init__.py", doc_block(OPERATIONS, "celery-init"))
        self.append("fresh/settings.py", doc_block(OPERATIONS, "celery-settings"))

    def pip_install(self, page: Path, name: str) -> None:
        """The ``pip install`` line of ``page``'s block ``name``, with this virtualenv's pip (first on PATH)."""
        (line,) = doc_block(page, name, "sh").splitlines()
        with locked(self.venv):  # the virtualenv is the session's: one pip at a time in it
            installed = run(shlex.split(line), self.path, PIP_TIMEOUT, self.env())
        if installed.returncode != 0:
            pip_failed(line, installed)

    def add_own_apps(self) -> None:
        """The project's own apps of :data:`OWN_APPS` (package ``shop``), installed, without migrations yet."""
        for label in OWN_APPS:
            app = self.path / "shop" / label
            app.mkdir(parents=True)
            for module, text in {"__init__.py": "", **OWN_APP_MODULES}.items():
                (app / module).write_text(text.format(label=label, model=OWN_MODELS[label]), encoding="utf-8")
        (self.path / "shop/__init__.py").write_text("", encoding="utf-8")
        self.append("fresh/settings.py", OWN_SETTINGS)


@contextmanager
def started(project: Project, lines: dict[str, str], env: dict[str, str], logs: Path) -> Iterator[Callable[[], None]]:
    """The commands ``lines`` (name -> command line) running in ``project``, each logging to ``logs/<name>.log``
    and in a process group of its own; yields a check that every one still runs, and stops them all (their
    groups: a Celery worker's pool too) on the way out."""
    files = {name: (logs / f"{name}.log").open("w") for name in lines}
    processes = {
        name: subprocess.Popen(["bash", "-c", "exec " + line], cwd=project.path, env=env, stdout=files[name],
                               stderr=subprocess.STDOUT, start_new_session=True)
        for name, line in lines.items()
    }  # fmt: skip

    def alive() -> None:
        dead = [name for name, process in processes.items() if process.poll() is not None]
        assert not dead, {name: (logs / f"{name}.log").read_text()[-3000:] for name in dead}

    try:
        yield alive
    finally:
        stop_groups(processes.values())
        for file in files.values():
            file.close()


def celery_lines() -> dict[str, str]:
    """The Operations page's worker and beat commands, for the project ``fresh``."""
    worker, beat = doc_block(OPERATIONS, "celery-run", "sh").replace("mysite", "fresh").splitlines()
    return {"worker": worker, "beat": beat}


@pytest.fixture(scope="session")
def pasted_project(venv: Path, tmp_path_factory: pytest.TempPathFactory, redis_server: RedisServer) -> Project:
    """A new project with the Getting started page's settings pasted in, migrated: made once per worker (it names
    the worker's redis-server), never used itself, only copied (``project``)."""
    return new_project(venv, tmp_path_factory.mktemp("pasted-project"), redis_server)


@pytest.fixture
def project(pasted_project: Project, tmp_path: Path) -> Project:
    """A new project with the Getting started page's settings pasted in, migrated: a copy of the worker's
    ``pasted_project`` (its files, its migrated SQLite database), which is what startproject, the pasted lines
    and migrate leave, without a startproject and a migrate per test."""
    site = tmp_path / "site"
    shutil.copytree(pasted_project.path, site, symlinks=True)
    return Project(pasted_project.venv, site)


def new_project(
    venv: Path, tmp_path: Path, redis_server: RedisServer, *snippets: tuple[str, str], migrate: bool = True
) -> Project:
    """A new project in ``venv`` with the Getting started page's settings, then ``snippets`` ((file, marker)
    pairs of the Operations page) pasted in, migrated unless ``migrate`` is false (a test that pastes more
    lines first migrates once, after them: each ``migrate`` is a Django start and seconds of CPU)."""
    site = tmp_path / "site"
    site.mkdir()
    started = run([venv / "bin/django-admin", "startproject", "fresh", site], site, 120, clean_env(venv))
    assert started.returncode == 0, started.stderr
    project = Project(venv, site)
    project.append("fresh/settings.py", doc_block(GETTING_STARTED, "fresh-project-settings"))
    project.append("fresh/settings.py", TEST_SETTINGS.format(redis_url=redis_server.url))
    (site / "fresh/ping.py").write_text(PING_VIEW, encoding="utf-8")
    project.append("fresh/urls.py", TEST_URLS)
    for relative, marker in snippets:
        project.append(relative, doc_block(OPERATIONS, marker))
    shutil.copy(PROBE, site / PROBE.name)
    if migrate:
        migrated = project.manage("migrate", "--noinput")
        assert migrated.returncode == 0, migrated.stdout + migrated.stderr
    return project


#: A project that used DRF before the platform: pagination, renderers, token authentication, DRF's own throttle
#: at 3/min for anonymous clients (so a few requests reach it). The Getting started page's lines for such a
#: project go after these.
EXISTING_DRF = """
# --- the project's own DRF setup, before the platform (tests/test_fresh_project.py) ---
INSTALLED_APPS += ["rest_framework", "rest_framework.authtoken"]
REST_FRAMEWORK = {
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 25,
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_AUTHENTICATION_CLASSES": ["rest_framework.authentication.TokenAuthentication"],
    "DEFAULT_THROTTLE_CLASSES": ["rest_framework.throttling.AnonRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {"anon": "3/min"},
}
"""


@pytest.fixture
def drf_project(venv: Path, tmp_path: Path, redis_server: RedisServer) -> Project:
    """A project that already used DRF, with the Getting started page's lines for such a project added, migrated."""
    site = tmp_path / "site"
    site.mkdir()
    started = run([venv / "bin/django-admin", "startproject", "fresh", site], site, 120, clean_env(venv))
    assert started.returncode == 0, started.stderr
    project = Project(venv, site)
    project.append("fresh/settings.py", EXISTING_DRF)
    project.append("fresh/settings.py", doc_block(GETTING_STARTED, "existing-drf-settings"))
    project.append("fresh/settings.py", f'QUOTAS["REDIS_URL"] = {redis_server.url!r}  # the session\'s Redis\n')
    (site / "fresh/ping.py").write_text(PING_VIEW, encoding="utf-8")
    project.append("fresh/urls.py", TEST_URLS)
    shutil.copy(PROBE, site / PROBE.name)
    project.ok("migrate", "--noinput")
    return project


def test_the_lines_for_a_project_that_already_uses_drf_keep_its_settings(drf_project: Project):
    """Pasted after an existing DRF setup, the page's lines pass the checks, keep the project's pagination,
    renderers, authentication and anonymous rate, put the API-key class first and QuotaThrottle in place of
    DRF's throttle: the 4th anonymous request is a problem+json 429 with RateLimit headers."""
    drf_project.ok("check")
    drf = drf_project.probe("drf_settings")
    assert drf["DEFAULT_PAGINATION_CLASS"] == "PageNumberPagination"
    assert drf["PAGE_SIZE"] == 25
    assert drf["DEFAULT_RENDERER_CLASSES"] == ["rest_framework.renderers.JSONRenderer"]
    assert drf["DEFAULT_AUTHENTICATION_CLASSES"] == [
        "quotas.drf.authentication.APIKeyAuthentication", "rest_framework.authentication.TokenAuthentication",
    ]  # fmt: skip
    assert drf["DEFAULT_THROTTLE_CLASSES"] == ["quotas.drf.throttling.QuotaThrottle"]  # quotas.throttling's
    assert drf["DEFAULT_THROTTLE_RATES"] == {"anon": "3/min", "user": "600/min"}
    assert drf["EXCEPTION_HANDLER"] == "quotas.drf.handlers"
    answers = drf_project.probe("throttle")["answers"]
    assert [a["status"] for a in answers] == [200, 200, 200, 429], answers
    assert answers[3]["headers"]["Content-Type"] == "application/problem+json"
    assert "RateLimit" in answers[3]["headers"]


def port_open(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def test_the_check_that_it_works_steps_run_as_written(project: Project):
    """Getting started's "Check that it works": the doctor finds no error, and the curl loop against the
    project's runserver prints 200s until the anonymous rate (3/min here) is spent, then 429s; the headers
    line shows the refusal's Retry-After, RateLimit fields and problem+json."""
    doctor = run(["bash", "-ec", doc_block(GETTING_STARTED, "verify-doctor", "sh")], project.path, 300, project.env())
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert "\nerror " not in doctor.stdout, doctor.stdout
    port = free_port()
    server = subprocess.Popen(
        [project.venv / "bin/python", "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"],
        cwd=project.path, env=project.env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not port_open(port):
            assert server.poll() is None, "runserver exited"
            assert time.monotonic() < deadline, "runserver did not listen within a minute"
            time.sleep(0.1)
        wait_for_room_in_the_minute(15)  # 62 requests inside one minute of the 3/min window
        loop = doc_block(GETTING_STARTED, "verify-loop", "sh").replace(
            "http://127.0.0.1:8000", f"http://127.0.0.1:{port}"
        )
        result = run(["bash", "-ec", loop], project.path, 120, project.env())
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert result.returncode == 0, result.stdout + result.stderr
    codes, *headers = result.stdout.splitlines()
    assert codes.split() == ["200"] * 3 + ["429"] * 58, codes
    shown = "\n".join(headers).lower()
    assert "http/1.1 429" in shown
    for field in ("retry-after:", "ratelimit:", "ratelimit-policy:", "content-type: application/problem+json"):
        assert field in shown, shown


def test_the_wheel_carries_every_app_with_its_files_and_licences(wheel: Path):
    """Every app's Python, migrations, templates, static files and Lua scripts are in the wheel, the
    licences are in its metadata, and the core requirements leave out what only some apps need."""
    names = set(zipfile.ZipFile(wheel).namelist())
    for app in APPS:
        in_checkout = {
            p.relative_to(ROOT).as_posix()
            for p in (ROOT / app).rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
        }
        assert in_checkout - names == set(), f"{app}: files of the checkout missing from the wheel"
    assert "plans/templates/admin/quota_plans/subscription/issued_keys.html" in names
    assert "dashboard/static/dashboard/vendor/chart.js.LICENSE" in names
    assert not [n for n in names if n.split("/")[0] in {"config", "demo", "tests", "bench"}]
    info = wheel.name.removesuffix("-py3-none-any.whl")
    assert f"{info}.dist-info/licenses/LICENSE" in names
    metadata = zipfile.ZipFile(wheel).read(f"{info}.dist-info/METADATA").decode()
    assert "License-Expression: MIT" in metadata
    core = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:") and "extra ==" not in line]
    assert any(line.replace(" ", "") == "Requires-Dist:Django<7,>=5.2" for line in core), core
    assert not [line for line in core if re.search(r"celery|psutil|spectacular", line, re.IGNORECASE)], core
    assert {"adaptive", "usage", "openapi", "all"} <= set(re.findall(r"^Provides-Extra: (\S+)$", metadata, re.M))


def test_the_getting_started_lines_pass_system_checks_and_migrate(project: Project):
    """``manage.py check`` passes and every migration of quotas and plans is applied, from the wheel."""
    checked = project.manage("check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    shown = project.manage("showmigrations", "quota_plans")
    assert shown.returncode == 0, shown.stderr
    assert "[X] 0001_initial" in shown.stdout
    assert "[ ]" not in shown.stdout
    where = project.probe("where")
    assert all(str(project.venv) in path for path in where.values()), where  # the wheel's code, not the checkout's


def test_drf_rates_refuse_with_ratelimit_headers(project: Project):
    """With DRF's anon rate at 3/min, the 4th anonymous request is a 429 problem+json with Retry-After
    and the RateLimit fields; the first three pass with RateLimit headers."""
    answers = project.probe("throttle")["answers"]
    assert [a["status"] for a in answers] == [200, 200, 200, 429], answers
    for allowed in answers[:3]:
        assert "RateLimit" in allowed["headers"], allowed["headers"]
    refused = answers[3]
    assert refused["headers"]["Content-Type"] == "application/problem+json", refused
    assert 0 < int(refused["headers"]["Retry-After"]) <= 60
    assert "RateLimit" in refused["headers"]
    assert "RateLimit-Policy" in refused["headers"]
    assert json.loads(refused["body"])["status"] == 429


def test_every_plans_admin_page_and_action_answers_without_a_server_error(project: Project):
    """A superuser opens every plans admin list, add and change page and runs every action offered
    (each intermediate page, then its confirmation): no 5xx, and each action did what it says."""
    result = project.probe("admin")
    statuses = result["statuses"]
    assert not [label for label, status in statuses.items() if not 200 <= status < 500], result
    assert {
        "POST /admin/quota_plans/subscription/ issue_api_key (confirmed)",
        "POST /admin/quota_plans/subscription/ move_to_plan (confirmed)",
        "POST /admin/quota_plans/apikey/ revoke",
        "POST /admin/quota_plans/clientban/ lift",
    } <= set(statuses), sorted(statuses)
    assert len(result["raw_keys"]) == 1  # shown once, on the page after the confirmation
    assert result["keys_revoked"] == 1
    assert result["bans_lifted"] == 1
    assert result["moved_to"] == "pro"


def test_the_usage_api_answers_once_usage_is_added(project: Project):
    """With the Getting started page's usage lines added (app and URLs), migrate works and the usage API answers a key
    holder with its report and standing, and an anonymous caller with a 401 problem."""
    project.append("fresh/settings.py", doc_block(GETTING_STARTED, "fresh-project-usage-settings"))
    project.append("fresh/urls.py", doc_block(GETTING_STARTED, "fresh-project-usage-urls"))
    checked = project.manage("check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    migrated = project.manage("migrate", "--noinput")
    assert migrated.returncode == 0, migrated.stdout + migrated.stderr

    result = project.probe("usage")
    assert result["ping"]["status"] == 200, result["ping"]
    report, current = result["report"], result["current"]
    assert report["status"] == 200, report
    assert report["headers"]["Content-Type"].startswith("application/json")
    # The usage API is not counted against the quota: it has a limit of its own (QUOTAS['USAGE_API_RATE']).
    assert report["headers"]["RateLimit-Policy"] == '"usage_api";q=120;w=60'
    assert current["status"] == 200, current
    assert result["anonymous"]["status"] == 401, result["anonymous"]
    assert result["anonymous"]["headers"]["Content-Type"] == "application/problem+json"


def test_our_apps_install_beside_the_projects_own_plans_and_usage_apps(project: Project):
    """A project with apps of its own labelled ``plans`` and ``usage`` (each with a model named like ours and an
    admin page) installs ours beside them: ``check`` passes, their migrations are made and applied with ours,
    ``makemigrations`` then finds nothing to do, and each app has its own tables and admin pages."""
    project.append("fresh/settings.py", doc_block(GETTING_STARTED, "fresh-project-usage-settings"))
    project.add_own_apps()
    project.ok("check")
    project.ok("makemigrations", *OWN_APPS)
    project.ok("migrate", "--noinput")
    project.ok("makemigrations", "--check", "--dry-run")
    shown = project.ok("showmigrations", *OWN_APPS, "quota_plans", "quota_usage")
    assert shown.count("[X] 0001_initial") == 4, shown
    assert "[ ]" not in shown, shown

    result = project.probe("labels")
    assert {"shop.plans": "plans", "shop.usage": "usage"}.items() <= result["labels"].items()
    assert {"plans": "quota_plans", "usage": "quota_usage", "quotas": "quotas"}.items() <= result["labels"].items()
    assert result["tables"] == {
        "plans.Plan": "plans_plan",
        "quota_plans.Plan": "quota_plans_plan",
        "usage.UsageRecord": "usage_usagerecord",
        "quota_usage.UsageRecord": "quota_usage_usagerecord",
    }
    assert result["rows"] == {"plans.Plan": 1, "quota_plans.Plan": 1}, result["rows"]
    assert set(result["admin"].values()) == {200}, result["admin"]


#: The migration guide, whose steps run in projects that used DRF's throttles or django-ratelimit.
MIGRATING = ROOT / "docs" / "migrating.md"
MIGRATION_DRF_VIEWS = """
from rest_framework.response import Response
from rest_framework.views import APIView

from fresh.throttles import BurstRateThrottle, TenantRateThrottle


class Ping(APIView):
    def get(self, request):
        return Response({"pong": True})


class Upload(Ping):
    throttle_scope = "uploads"


class Burst(Ping):
    throttle_classes = [BurstRateThrottle]


class Tenant(Ping):
    throttle_classes = [TenantRateThrottle]
"""
MIGRATION_DRF_URLS = """
# --- added by tests/test_fresh_project.py: the views of the migration guide's project ---
from django.urls import path as _path  # noqa: E402

from fresh import drf_views as _views  # noqa: E402

urlpatterns += [_path(f"api/{name.lower()}", getattr(_views, name).as_view()) for name in
                ("Ping", "Upload", "Burst", "Tenant")]
"""
MIGRATION_RATELIMIT_URLS = """
# --- added by tests/test_fresh_project.py: the views of the migration guide's project ---
from django.urls import path as _path  # noqa: E402

from fresh import rl_views as _views  # noqa: E402

urlpatterns += [_path("rl/hello", _views.hello), _path("rl/submit", _views.submit)]
"""


def bare_project(venv: Path, tmp_path: Path) -> Project:
    """A new project as startproject makes it, with the probe."""
    site = tmp_path / "site"
    site.mkdir()
    started = run([venv / "bin/django-admin", "startproject", "fresh", site], site, 120, clean_env(venv))
    assert started.returncode == 0, started.stderr
    shutil.copy(PROBE, site / PROBE.name)
    return Project(venv, site)


def test_the_drf_migration_steps_keep_every_rate(venv: Path, tmp_path: Path, redis_server: RedisServer):
    """A project on DRF's throttles (default classes, a scoped view, a Burst throttle, a per-tenant key) answers
    the same statuses after the guide's two steps, now with the RateLimit headers."""
    project = bare_project(venv, tmp_path)
    project.append("fresh/settings.py", 'INSTALLED_APPS += ["rest_framework"]\n')
    project.append("fresh/settings.py", doc_block(MIGRATING, "migrate-drf-before", "python"))
    (project.path / "fresh/throttles.py").write_text(doc_block(MIGRATING, "migrate-drf-views-before", "python"))
    (project.path / "fresh/drf_views.py").write_text(MIGRATION_DRF_VIEWS)
    project.append("fresh/urls.py", MIGRATION_DRF_URLS)
    project.ok("check")
    before = project.probe("migration_drf")
    assert {name: answers["statuses"] for name, answers in before.items()} == {
        "ping": [200, 200, 200, 429], "upload": [200, 200, 429], "burst": [200, 200, 200, 200, 429],
        "tenant": [200, 200, 429, 200],
    }, before  # fmt: skip
    project.append("fresh/settings.py", doc_block(MIGRATING, "migrate-drf-after", "python"))
    project.append("fresh/settings.py", f'QUOTAS["REDIS_URL"] = {redis_server.url!r}  # the session\'s Redis\n')
    (project.path / "fresh/throttles.py").write_text(doc_block(MIGRATING, "migrate-drf-views-after", "python"))
    project.ok("check")
    after = project.probe("migration_drf")
    assert {name: answers["statuses"] for name, answers in after.items()} == {
        name: answers["statuses"] for name, answers in before.items()
    }, after  # fmt: skip
    assert not any(answers["headers"] for answers in before.values())
    assert all(answers["headers"] for answers in after.values()), after


def test_the_django_ratelimit_migration_keeps_every_rate(venv: Path, tmp_path: Path, redis_server: RedisServer):
    """A project's django-ratelimit views answer the same after the guide's step, the blocked request now a
    429 (not django-ratelimit's 403) with the RateLimit headers, block=False still setting request.limited."""
    with locked(venv):  # the virtualenv is the session's: one pip at a time in it
        installed = run([venv / "bin/python", "-m", "pip", "install", NO_COMPILE, "django-ratelimit"], tmp_path,
                        PIP_TIMEOUT, clean_env(venv))  # fmt: skip
    if installed.returncode != 0:
        pip_failed("pip install django-ratelimit", installed)
    project = bare_project(venv, tmp_path)
    (project.path / "fresh/rl_views.py").write_text(doc_block(MIGRATING, "migrate-ratelimit-before", "python"))
    project.append("fresh/urls.py", MIGRATION_RATELIMIT_URLS)
    project.ok("check")
    before = project.probe("migration_ratelimit")
    assert before == {"statuses": [200, 200, 200, 403], "headers": False, "limited": [False, False, True]}
    project.append("fresh/settings.py", doc_block(MIGRATING, "migrate-ratelimit-settings", "python"))
    project.append("fresh/settings.py", f'QUOTAS["REDIS_URL"] = {redis_server.url!r}  # the session\'s Redis\n')
    (project.path / "fresh/rl_views.py").write_text(doc_block(MIGRATING, "migrate-ratelimit-after", "python"))
    project.ok("check")
    after = project.probe("migration_ratelimit")
    assert after == {"statuses": [200, 200, 200, 429], "headers": True, "limited": [False, False, True]}


#: The production deployment page, every block of which runs in order here.
DEPLOYMENT = ROOT / "docs" / "deployment.md"


def assert_the_operations_views_answer(project: Project) -> None:
    """With the Operations page's apps, middleware and URLs pasted in (and the [adaptive] extra installed), check
    and migrate pass and every mounted view answers: /healthz to anyone, /metrics, the dashboard and the usage
    API to staff only, the usage page's sign-in form to anyone."""
    project.ok("check")
    result = project.probe("mounted")
    assert result["anonymous"]["/healthz"] == 200
    assert result["anonymous"]["/usage/"] == 200  # the sign-in form
    assert result["anonymous"]["/metrics"] in (401, 403)
    assert result["anonymous"]["/dashboard/"] in (302, 403)  # to the admin's sign-in
    assert {path: status for path, status in result["staff"].items() if path != "/api/v1/usage/"} == {
        "/healthz": 200, "/metrics": 200, "/dashboard/": 200, "/usage/": 200,
    }  # fmt: skip
    assert result["staff"]["/api/v1/usage/"] == 200


@pytest.fixture
def postgres_database() -> Iterator[dict[str, str]]:
    """A new database on the machine's PostgreSQL (dropped afterwards), as the deployment's DB_* variables."""
    import psycopg  # pinned in requirements.txt: its absence is a broken install, not a reason to skip

    name = f"deploy_{os.getpid()}_{int(time.time())}"
    try:
        admin = psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        skip_or_fail(f"needs PostgreSQL on 127.0.0.1:5432 (user postgres): {exc}")
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield {"DB_NAME": name, "DB_USER": "postgres", "DB_HOST": "127.0.0.1", "DB_PORT": "5432"}
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def http_get(port: int, path: str) -> tuple[int, dict[str, str]]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", path, headers={"Host": "127.0.0.1"})
        response = connection.getresponse()
        response.read()
        return response.status, dict(response.getheaders())
    finally:
        connection.close()


def test_the_production_deployment_runs_as_written(
    venv_adaptive: Path, tmp_path: Path, redis_server: RedisServer, postgres_database: dict[str, str]
):
    """Every block of the deployment page, in order, in a new project (``fresh`` for the page's ``mysite``) with
    Getting started's and Operations' lines: the install line, the settings from the environment, gunicorn's
    config, the release step against PostgreSQL, then the Procfile's web, worker and beat. The web process
    answers /healthz and refuses the 4th anonymous request with a 429; the worker runs the beat's
    adaptive.control.

    First, before the deployment's lines, the Operations page's views answer in that project (its own test once:
    a project of its own with the same lines cost a startproject and a migrate more)."""
    project = new_project(
        venv_adaptive, tmp_path, redis_server,
        ("fresh/settings.py", "fresh-project-ops-settings"), ("fresh/urls.py", "fresh-project-ops-urls"),
    )  # fmt: skip
    assert_the_operations_views_answer(project)
    project.add_celery()
    project.pip_install(DEPLOYMENT, "deploy-install")
    project.append("fresh/settings.py", doc_block(DEPLOYMENT, "deploy-settings", "python"))
    port = free_port()
    gunicorn_conf = doc_block(DEPLOYMENT, "deploy-gunicorn", "python")
    (project.path / "gunicorn.conf.py").write_text(gunicorn_conf.replace("0.0.0.0:8000", f"127.0.0.1:{port}"))
    env = {
        **project.env(), **postgres_database, "SECRET_KEY": "deployment-test-" + "x" * 40,
        "ALLOWED_HOSTS": "127.0.0.1,localhost", "QUOTAS_REDIS_URL": redis_server.url,
        "CELERY_BROKER_URL": redis_server.url.rsplit("/", 1)[0] + "/1",
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "prometheus"),
    }  # fmt: skip
    release = run(["bash", "-ec", doc_block(DEPLOYMENT, "deploy-release", "sh")], project.path, 300, env)
    assert release.returncode == 0, release.stdout[-3000:] + release.stderr[-3000:]
    procfile = dict(line.split(": ", 1) for line in doc_block(DEPLOYMENT, "deploy-procfile", "").splitlines())
    assert set(procfile) == {"web", "worker", "beat"}
    lines = {name: line.replace("mysite", "fresh") for name, line in procfile.items()}
    with started(project, lines, env, tmp_path) as alive:
        deadline = time.monotonic() + 120
        while not port_open(port) or (tmp_path / "worker.log").read_text().find("adaptive.control") < 0:
            alive()
            assert time.monotonic() < deadline, {
                name: (tmp_path / f"{name}.log").read_text()[-2000:] for name in procfile
            }
            time.sleep(0.1)  # reading a log file: cheap, and each wait ends sooner
        assert http_get(port, "/healthz")[0] == 200
        wait_for_room_in_the_minute(5)
        answers = [http_get(port, "/api/ping") for _ in range(4)]
        assert [status for status, _ in answers] == [200, 200, 200, 429], answers
        assert "RateLimit" in answers[3][1]
        deadline = time.monotonic() + 60
        while not re.search(r"Task adaptive\.control\[[^\]]+\] succeeded", (tmp_path / "worker.log").read_text()):
            assert time.monotonic() < deadline, (tmp_path / "worker.log").read_text()[-3000:]
            time.sleep(0.1)


#: The real HTTP receiver of the notification tests, as the fixture ``webhook_receiver``.
webhook_receiver = notification_fixtures.receiver
#: The customer notifications page, whose settings and URL lines the real-worker test pastes.
NOTIFICATIONS = ROOT / "docs" / "notifications.md"


def test_a_real_worker_and_beat_deliver_a_signed_webhook(
    wheel: Path, venv_adaptive: Path, tmp_path: Path, redis_server: RedisServer, webhook_receiver: Receiver
):
    """The notifications page's lines in a new project with the Operations page's Celery: a request that spends a
    day budget is answered at once; the project's own worker and beat then POST the signed events (80 % and
    100 %) to a real receiver, and the page's signature check accepts them.

    The same worker and beat show the Operations page's broker transport, Celery app, its import in the package,
    its settings and its two commands at work (package ``fresh`` for the page's ``mysite``): the worker runs
    adaptive.control as beat sends it every 5 s, and usage.flush when asked (its own test once, which started a
    worker and a beat of their own in a project of its own)."""
    with locked(venv_adaptive):  # the virtualenv is the session's: one pip at a time in it
        installed = run([venv_adaptive / "bin/python", "-m", "pip", "install", NO_COMPILE, f"{wheel}[notifications]"],
                        tmp_path, PIP_TIMEOUT, clean_env(venv_adaptive))  # fmt: skip
    if installed.returncode != 0:
        pip_failed("pip install [notifications]", installed)
    project = new_project(
        venv_adaptive, tmp_path, redis_server, ("fresh/settings.py", "fresh-project-ops-settings"), migrate=False
    )  # migrated once, below, with the notifications app
    project.add_celery()
    project.append("fresh/settings.py", doc_block(NOTIFICATIONS, "notifications-settings", "python"))
    project.append("fresh/urls.py", doc_block(NOTIFICATIONS, "notifications-urls", "python"))
    broker = redis_server.url.rsplit("/", 1)[0] + "/1"
    project.append(
        "fresh/settings.py",
        f"""
# --- the test's own: its broker, and a receiver on loopback over plain HTTP (refused by default) ---
CELERY_BROKER_URL = {broker!r}
QUOTAS["NOTIFICATIONS"] = {{"ALLOW_PRIVATE_ADDRESSES": True, "ALLOW_HTTP": True}}
""",
    )
    project.pip_install(OPERATIONS, "celery-install")
    project.ok("migrate", "--noinput")
    project.ok("check")
    receiver = webhook_receiver
    env = {**project.env(), "RECEIVER_URL": receiver.url}
    made = run([project.venv / "bin/python", project.path / PROBE.name, "notify"], project.path, 300, env)
    assert made.returncode == 0, made.stdout[-3000:] + made.stderr[-3000:]
    notify = json.loads(made.stdout.strip().splitlines()[-1])
    assert notify["statuses"] == [200, 200]
    assert receiver.requests == []  # nothing was sent by the requests themselves
    with started(project, celery_lines(), env, tmp_path) as alive:
        called = run([project.venv / "bin/celery", "-A", "fresh", "call", "usage.flush"], project.path, 60, env)
        assert called.returncode == 0, called.stdout + called.stderr
        deadline = time.monotonic() + 120
        while True:
            worker_log = (tmp_path / "worker.log").read_text()
            done = {
                task: re.search(rf"Task {task}\[[^\]]+\] succeeded", worker_log)
                for task in ("usage.flush", "adaptive.control")
            }
            if all(done.values()) and len(receiver.requests) >= 2:
                break
            alive()
            assert time.monotonic() < deadline, (
                f"not done within 2 minutes: {done}, {len(receiver.requests)} webhooks\n{worker_log[-3000:]}"
            )
            time.sleep(0.1)
    assert "Sending due task adaptive-control (adaptive.control)" in (tmp_path / "beat.log").read_text()
    verify = documented_verifier()
    bodies = []
    for got in receiver.requests:
        assert verify(got.headers["Quota-Signature"], got.body, notify["secret"])
        bodies.append(json.loads(got.body))
    assert sorted(b["data"]["threshold"] for b in bodies) == [80, 100]
    assert {b["type"] for b in bodies} == {"budget.threshold_crossed"}
