"""Fixtures: a real 3-primary Redis Cluster and a real Sentinel group (primary, replica, 3 Sentinels).

Each topology is started once per session (a few seconds each), emptied before
every test that uses it, and always stopped. ``topology`` runs a test on both;
``engine_on`` points the process's engine at one through ``override_settings``
(the engine is rebuilt on ``setting_changed``). A machine without redis-server
skips these tests, or fails them under QUOTAS_REQUIRE_SERVICES=1.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from django.conf import settings
from django.test import override_settings

from quotas.engine import default_engine
from quotas.runtime import Runtime
from tests.conftest import started

from .servers import Cluster, SentinelGroup


@pytest.fixture(scope="session")
def cluster(redis_cluster: Cluster) -> Cluster:
    """A running 3-primary Redis Cluster (all slots covered): the session's, which the behaviour suite uses too."""
    return redis_cluster


@pytest.fixture(scope="session")
def sentinel_group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SentinelGroup]:
    """A running primary/replica pair under 3 Sentinels, replica in sync."""
    topology = started(SentinelGroup(tmp_path_factory.mktemp("sentinel")), "Redis Sentinel")
    yield topology
    topology.stop()


@dataclass
class Topology:
    """One topology under test: its name, its REDIS_URL and the processes behind it."""

    name: str
    url: str
    servers: Cluster | SentinelGroup


@pytest.fixture(params=["cluster", "sentinel"])
def topology(request: pytest.FixtureRequest) -> Topology:
    """Each topology in turn, emptied (data, scripts, statistics)."""
    servers = request.getfixturevalue("cluster" if request.param == "cluster" else "sentinel_group")
    servers.flushall()
    return Topology(request.param, servers.url, servers)


@pytest.fixture
def runtime_on() -> Iterator:
    """``engine_on(url)``: the process's engine, built for ``REDIS_URL = url`` until the test ends."""
    overrides = []

    def build(url: str) -> Runtime:
        override = override_settings(QUOTAS={**settings.QUOTAS, "REDIS_URL": url})
        override.enable()
        overrides.append(override)
        return default_engine.runtime()

    yield build
    for override in reversed(overrides):
        override.disable()
    default_engine.reset()


@pytest.fixture
def topo_runtime(topology: Topology, runtime_on) -> Runtime:
    """The engine on the current topology."""
    return runtime_on(topology.url)
