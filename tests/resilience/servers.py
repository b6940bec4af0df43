"""Real multi-server Redis topologies for the resilience tests: a 3-primary Cluster, and a
primary/replica pair watched by 3 Sentinels. Every process runs on a free loopback port with
its files in a temporary directory, and :meth:`stop` ends every process that was started.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import redis

from config.embedded_redis import RedisServer, free_port, redis_server_binary

CLUSTER_SLOTS = 16384
SERVICE = "mymaster"


@dataclass
class Node(RedisServer):
    """A redis-server with extra command-line options (cluster mode, replicaof)."""

    extra: tuple[str, ...] = ()

    def command(self) -> list[str]:
        return [*super().command(), *self.extra]

    def client(self, **kwargs) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=2, socket_connect_timeout=2, **kwargs)


def wait_until(condition: Callable[[], object], timeout: float, what: str, interval: float = 0.05) -> object:
    """Poll ``condition`` until it returns something truthy; RuntimeError naming ``what`` after ``timeout`` s.

    Redis errors while polling count as "not yet".
    """
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while True:
        try:
            result = condition()
            if result:
                return result
        except (redis.RedisError, OSError) as exc:
            last_error = exc
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what} (last error: {last_error})")
        time.sleep(interval)


def cluster_port() -> int:
    """A free port whose cluster bus port (port + 10000) is free and valid too."""
    for _ in range(100):
        port = free_port()
        if port + 10000 < 65536:
            try:
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port pair (port, port + 10000) for a cluster node")


def add_slots(client: redis.Redis, first: int, last: int) -> None:
    """Assign slots ``first``..``last`` to the node: ADDSLOTSRANGE (Redis 7), else ADDSLOTS in chunks (6.2)."""
    try:
        client.execute_command("CLUSTER ADDSLOTSRANGE", first, last)
    except redis.ResponseError:
        for start in range(first, last + 1, 1000):
            client.execute_command("CLUSTER ADDSLOTS", *range(start, min(start + 1000, last + 1)))


@dataclass
class Cluster:
    """Three cluster-enabled redis-servers, the slots split evenly, no replicas."""

    base_dir: Path
    size: int = 3
    nodes: list[Node] = field(default_factory=list)

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    def start(self, timeout: float = 20.0) -> Cluster:
        try:
            for _ in range(self.size):
                port = cluster_port()
                node = Node(data_dir=self.base_dir / f"node-{port}", port=port)
                node.extra = (
                    "--cluster-enabled", "yes",
                    "--cluster-config-file", str(self.base_dir / f"nodes-{port}.conf"),
                    "--cluster-node-timeout", "2000",
                )  # fmt: skip
                self.nodes.append(node.start())
            clients = [n.client() for n in self.nodes]
            try:
                per_node = CLUSTER_SLOTS // self.size
                for i, client in enumerate(clients):
                    first = i * per_node
                    last = CLUSTER_SLOTS - 1 if i == self.size - 1 else first + per_node - 1
                    add_slots(client, first, last)
                for other in self.nodes[1:]:
                    clients[0].execute_command("CLUSTER MEET", "127.0.0.1", other.port)
                for node, client in zip(self.nodes, clients, strict=True):
                    wait_until(
                        lambda c=client: c.execute_command("CLUSTER INFO")["cluster_state"] == "ok",
                        timeout,
                        f"cluster_state:ok on node {node.port}",
                    )
                    wait_until(
                        lambda c=client: len(c.execute_command("CLUSTER NODES")) == self.size,
                        timeout,
                        f"node {node.port} to know every node",
                    )
            finally:
                for client in clients:
                    client.close()
        except BaseException:
            self.stop()
            raise
        return self

    def flushall(self) -> None:
        """Data, scripts, the function library and statistics: as new (the behaviour suite shares it)."""
        for node in self.nodes:
            client = node.client()
            try:
                client.flushall()
                client.script_flush()
                client.function_flush()
                client.config_resetstat()
            finally:
                client.close()

    def stop(self) -> None:
        for node in self.nodes:
            node.stop(kill=True)


@dataclass
class SentinelGroup:
    """A primary and its replica, watched by three Sentinels (quorum 2) under :data:`SERVICE`."""

    base_dir: Path
    servers: list[Node] = field(default_factory=list)  # [first primary, first replica]
    sentinels: list[SentinelProcess] = field(default_factory=list)

    @property
    def url(self) -> str:
        return "redis+sentinel://" + ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels) + f"/{SERVICE}/0"

    def start(self, timeout: float = 20.0) -> SentinelGroup:
        try:
            # No 5 s wait before a diskless full sync (the default delay), on both: either may become primary.
            fast_sync = ("--repl-diskless-sync-delay", "0")
            primary = Node(data_dir=self.base_dir / "primary", extra=fast_sync).start()
            self.servers.append(primary)
            replica = Node(
                data_dir=self.base_dir / "replica", extra=(*fast_sync, "--replicaof", "127.0.0.1", str(primary.port))
            )
            self.servers.append(replica.start())
            # Sentinels read a replica's link state only every few seconds: start them once it is in sync.
            wait_until(lambda: self._in_sync(primary.port), timeout, "the replica to sync")
            for i in range(3):
                self.sentinels.append(SentinelProcess(self.base_dir / f"sentinel-{i}", primary.port).start())
            self.wait_healthy(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def primary_port(self) -> int:
        """The primary's port as the first Sentinel reports it."""
        client = self.sentinels[0].client()
        try:
            return int(client.sentinel_get_master_addr_by_name(SERVICE)[1])
        finally:
            client.close()

    def server(self, port: int) -> Node:
        return next(s for s in self.servers if s.port == port)

    def wait_healthy(self, timeout: float, sentinel_link_status: bool = True) -> None:
        """Every Sentinel agrees on the primary, sees the other two Sentinels and a replica in sync.

        Sentinels refresh a replica's link status only every 10 s (the primary's
        own view is checked too): ``sentinel_link_status=False`` skips theirs.
        """

        def healthy() -> bool:
            ports = set()
            for sentinel in self.sentinels:
                client = sentinel.client()
                try:
                    master = client.sentinel_master(SERVICE)
                    replicas = client.sentinel_slaves(SERVICE)
                finally:
                    client.close()
                if _flags(master) != {"master"} or master["num-other-sentinels"] != 2:
                    return False
                if not any(
                    _flags(r) == {"slave"} and (r.get("master-link-status") == "ok" or not sentinel_link_status)
                    for r in replicas
                ):
                    return False
                ports.add(int(master["port"]))
            return len(ports) == 1 and self._in_sync(ports.pop())

        wait_until(healthy, timeout, "the Sentinels to agree on a primary with a replica in sync", interval=0.1)

    def _in_sync(self, primary_port: int) -> bool:
        client = self.server(primary_port).client()
        try:
            info = client.info("replication")
        finally:
            client.close()
        return info["role"] == "master" and info.get("slave0", {}).get("state") == "online"

    def flushall(self) -> None:
        """Data, scripts, the function library and statistics: as new (the cluster's does the same)."""
        client = self.server(self.primary_port()).client()
        try:
            client.flushall()
            client.script_flush()
            client.function_flush()  # else a library loaded by an earlier test is found by the next one
            client.config_resetstat()
        finally:
            client.close()

    def stop(self) -> None:
        for process in [*self.sentinels, *self.servers]:
            process.stop(kill=True)


def _flags(state: dict) -> set[str]:
    flags = state["flags"]
    return set(flags.split(",")) if isinstance(flags, str) else set(flags)


@dataclass
class SentinelProcess:
    """``redis-server <conf> --sentinel`` monitoring the primary on ``primary_port``."""

    data_dir: Path
    primary_port: int
    port: int = 0
    server: Node | None = None

    def start(self) -> SentinelProcess:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        conf = self.data_dir / "sentinel.conf"  # Sentinel rewrites its own config file: one each
        conf.write_text(
            f"port {self.port}\n"
            "bind 127.0.0.1\n"
            f"dir {self.data_dir}\n"
            f"sentinel monitor {SERVICE} 127.0.0.1 {self.primary_port} 2\n"
            f"sentinel down-after-milliseconds {SERVICE} 1000\n"
            f"sentinel failover-timeout {SERVICE} 5000\n"
            f"sentinel parallel-syncs {SERVICE} 1\n"
        )
        server = SentinelNode(data_dir=self.data_dir, port=self.port, conf=conf)
        self.server = server.start()
        return self

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=2, socket_connect_timeout=2, decode_responses=True)

    def stop(self, kill: bool = False) -> None:
        if self.server is not None:
            self.server.stop(kill=kill)


@dataclass
class SentinelNode(Node):
    conf: Path | None = None

    def command(self) -> list[str]:
        return [redis_server_binary(), str(self.conf), "--sentinel"]
