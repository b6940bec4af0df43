"""Section 9: how many decisions per second one Redis process, and a Redis Cluster of 1 and of 3 primaries, sustain.

Variants: our decision script with 1 limit and with 5 limits (every
algorithm, usage counted as on the request path), and the best peer, the
``limits`` library's sliding window counter on Redis. Each runs on a fresh
redis-server of its own, then on a fresh 1-primary and a fresh 3-primary
cluster (no replicas).

Our request path costs about 400 us of Python per decision, so no number of
DRF throttles on this machine could saturate Redis. The drivers
(:mod:`bench.scale_driver`) therefore replay exactly the commands the
engine (and limits) would send, built by the engine itself (and by limits'
own key helpers) and packed once, pipelined from forked processes. Each
command is routed to the node owning its key's slot, as a cluster client does.

Each variant runs with 1, then 2 (then 3) driver processes while that still
raises the rate by :data:`SATURATION_GAIN`; the best run is reported with
Redis's CPU during it (INFO cpu, user + sys, over wall time, summed over the
shards). On a 2-core machine the drivers compete with Redis for the CPU, so
the absolute rate says as much about the drivers as about Redis; the
machine-independent figure is "decisions per second per Redis core":
decisions/s divided by the fraction of a core Redis used.

limits on a cluster: its sliding window counter keeps two keys per client,
``LIMITS:{<key>}`` and ``LIMITS:{<key>}/-1``; the ``{...}`` hash tag (see
``RedisStorage._current_window_key``) puts both in one slot, so its script
is valid on a cluster, and ``RedisClusterStorage`` inherits these helpers.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import redis
from django.conf import settings
from django.test import override_settings
from hiredis import pack_command
from limits import parse
from limits.storage import RedisClusterStorage, RedisStorage
from redis.crc import key_slot

from config.embedded_redis import RedisServer
from quotas.contract.keys import client_tag
from quotas.rules.limits import Window
from quotas.runtime import Runtime, build_runtime
from quotas.store.decision import DecideCall
from tests.resilience.servers import Cluster

from . import rules
from .scale_driver import BATCH, IN_FLIGHT, Address, DriverLoad, batches_of, measure

#: Distinct clients per driver process, so keys spread over the engine's buckets and the cluster's slots.
CLIENTS_PER_DRIVER = 3000
#: A further driver process is tried only while the previous one raised the rate by this much.
SATURATION_GAIN = 0.05
#: What limits is asked to allow: far more than any run reaches.
LIMITS_RATE = "1000000/minute"
VARIANTS = ("quota_1", "quota_5", "limits_swc")
#: name -> cluster primaries (0: a plain redis-server). A 1-primary cluster shows what cluster mode itself
#: costs; the 3-primary one what sharding adds.
TOPOLOGIES = {"single": 0, "cluster-1": 1, "cluster": 3}

#: A command to send, and the key that routes it to a cluster node.
Routed = tuple[str, bytes]


def _windows(variant: str) -> tuple[list[Window], str]:
    """The windows of ``variant`` and its usage string ("<plan id>|<scope>"), as the request path passes them."""
    if variant == "quota_1":
        return list(rules.ONE_LIMIT.windows), f"{rules.PLAN_ID}|{rules.ONE_LIMIT_SCOPE}"
    return [w for rule in rules.FIVE_LIMITS for w in rule.windows], f"{rules.PLAN_ID}|{rules.FIVE_LIMITS_SCOPE}"


def _tag(i: int) -> str:
    return client_tag("user", str(i))


def quota_commands(runtime: Runtime, variant: str, clients: range) -> list[Routed]:
    """The decision script call for each client, packed, with its routing key."""
    windows, usage = _windows(variant)
    out = []
    for i in clients:
        keys, args, _ = runtime.store.encode(DecideCall(_tag(i), windows, usage=usage))
        script = runtime.store.transport.script("decide")
        command = script.command(keys, args)  # FCALL, or EVALSHA on Redis 6.2
        out.append((keys[0], pack_command(command)))  # type: ignore[arg-type]
    return out


def limits_call(storage: RedisStorage, client: int) -> tuple[str, tuple[object, ...]]:
    """What ``SlidingWindowCounterRateLimiter.hit(parse(LIMITS_RATE), "bench", str(client))`` sends, and its key.

    Built as ``RedisStorage.acquire_sliding_window_entry`` builds it: both
    keys from limits' own helpers, ARGV limit, expiry (s), amount, by the SHA
    of the storage's registered script.
    """
    item = parse(LIMITS_RATE)
    key = item.key_for("bench", str(client))
    keys = (
        storage.prefixed_key(storage._previous_window_key(key)),
        storage.prefixed_key(storage._current_window_key(key)),
    )
    if key_slot(keys[0].encode()) != key_slot(keys[1].encode()):  # what its hash tag is for
        raise RuntimeError(f"limits' keys {keys} would be in two cluster slots")
    sha = storage.lua_acquire_sliding_window.sha
    return keys[1], ("EVALSHA", sha, len(keys), *keys, item.amount, item.get_expiry(), 1)


def limits_commands(storage: RedisStorage, clients: range) -> list[Routed]:
    """:func:`limits_call` for each client, packed, with its routing key."""
    out = []
    for i in clients:
        key, command = limits_call(storage, i)
        out.append((key, pack_command(command)))  # type: ignore[arg-type]
    return out


def driver_loads(
    routed: Sequence[Routed], route: Callable[[str], Address], drivers: int, kind: str
) -> list[DriverLoad]:
    """Split ``routed`` into ``drivers`` shares of :data:`CLIENTS_PER_DRIVER`, each batched per node."""
    loads = []
    for d in range(drivers):
        per_node: dict[Address, list[bytes]] = {}
        for key, packed in routed[d * CLIENTS_PER_DRIVER : (d + 1) * CLIENTS_PER_DRIVER]:
            per_node.setdefault(route(key), []).append(packed)
        loads.append(DriverLoad({address: batches_of(cmds) for address, cmds in per_node.items()}, kind))
    return loads


def runtime_on(url: str) -> Runtime:
    """An engine of the bench's settings on the Redis at ``url`` (apart from this process's own engine)."""
    with override_settings(QUOTAS={**settings.QUOTAS, "REDIS_URL": url}):
        return build_runtime()


class Topology:
    """Fresh servers for one topology: where each key goes, and how to make sure the scripts are there."""

    def __init__(self, name: str, base_dir: Path, stack: ExitStack) -> None:
        self.name = name
        primaries = TOPOLOGIES[name]
        if not primaries:
            server = RedisServer(data_dir=base_dir / "single")
            stack.callback(server.stop, kill=True)
            server.start()
            self.addresses: list[Address] = [("127.0.0.1", server.port)]
            self.url = server.url
            self.limits_storage: RedisStorage = RedisStorage(self.url)
        else:
            cluster = Cluster(base_dir / name, size=primaries)
            stack.callback(cluster.stop)  # before start(): it stops what it started if start fails
            cluster.start()
            self.addresses = [("127.0.0.1", node.port) for node in cluster.nodes]
            self.url = cluster.url
            self.limits_storage = RedisClusterStorage(self.url)
            stack.callback(self.limits_storage.storage.close)
        self._slots: dict[int, Address] = {}
        admin = redis.Redis(host=self.addresses[0][0], port=self.addresses[0][1], socket_timeout=5)
        try:
            if primaries:
                for first, last, (host, port, *_), *_ in admin.execute_command("CLUSTER SLOTS"):
                    host = host.decode() if isinstance(host, bytes) else host
                    # A node that never met another does not know its own address: it answers "".
                    node = (host or self.addresses[0][0], int(port))
                    self._slots.update(dict.fromkeys(range(first, last + 1), node))
        finally:
            admin.close()
        self.engine = runtime_on(self.url)
        stack.callback(self.engine.close)

    def route(self, key: str) -> Address:
        """The node that owns ``key``'s slot."""
        return self._slots[key_slot(key.encode())] if self._slots else self.addresses[0]

    def load_scripts(self, variant: str, routed: Sequence[Routed]) -> None:
        """Load ``variant``'s script on every node before the drivers send it by SHA (or function name).

        For ours, one real decision on each node through the engine, which
        loads whatever it calls; for limits, SCRIPT LOAD of its script, what
        redis-py's Script does on NOSCRIPT.
        """
        for address in self.addresses:
            if variant == "limits_swc":
                client = redis.Redis(host=address[0], port=address[1], socket_timeout=5)
                try:
                    client.script_load(self.limits_storage.lua_acquire_sliding_window.script)
                finally:
                    client.close()
            else:
                i = next(i for i, (key, _) in enumerate(routed) if self.route(key) == address)
                windows, usage = _windows(variant)
                if not self.engine.guard.decide(_tag(i), windows, usage=usage).allowed:
                    raise RuntimeError(f"the warm-up decision for {_tag(i)} on {address} was refused")


def _ladder(
    topology: Topology, variant: str, routed: Sequence[Routed], *, max_drivers: int, warmup: float, seconds: float
) -> dict[str, Any]:
    """1, 2, ... driver processes while each raises the rate; every run and the best."""
    kind = "limits" if variant == "limits_swc" else "decide"
    runs: list[dict[str, Any]] = []
    for drivers in range(1, max_drivers + 1):
        loads = driver_loads(routed, topology.route, drivers, kind)
        runs.append(measure(loads, topology.addresses, warmup, seconds))
        if drivers > 1 and runs[-1]["decisions_per_s"] < runs[-2]["decisions_per_s"] * (1 + SATURATION_GAIN):
            break
    best = max(runs, key=lambda r: r["decisions_per_s"])
    return {"topology": topology.name, "variant": variant, "shards": len(topology.addresses), **best, "runs": runs}


def run(max_drivers: int, seconds: float, warmup: float) -> dict[str, Any]:
    """Every variant on one redis-server, then on a 3-shard cluster; servers are stopped on return or error."""
    clients = range(max_drivers * CLIENTS_PER_DRIVER)
    rows = []
    with ExitStack() as stack:
        base_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-scale-")))
        started = time.monotonic()
        topologies = [Topology(name, base_dir, stack) for name in TOPOLOGIES]
        # Keys do not depend on the topology: every variant's calls are built once and routed per topology.
        runtime = topologies[0].engine
        commands = {
            "quota_1": quota_commands(runtime, "quota_1", clients),
            "quota_5": quota_commands(runtime, "quota_5", clients),
            "limits_swc": limits_commands(topologies[0].limits_storage, clients),
        }
        setup_seconds = time.monotonic() - started
        for topology in topologies:
            for variant in VARIANTS:
                topology.load_scripts(variant, commands[variant])
                rows.append(
                    _ladder(
                        topology, variant, commands[variant], max_drivers=max_drivers, warmup=warmup, seconds=seconds
                    )
                )
    return {
        "rows": rows,
        "clients_per_driver": CLIENTS_PER_DRIVER,
        "max_drivers": max_drivers,
        "batch": BATCH,
        "in_flight": IN_FLIGHT,
        "seconds_per_run": seconds,
        "limits_rate": LIMITS_RATE,
        "setup_seconds": round(setup_seconds, 1),
    }
