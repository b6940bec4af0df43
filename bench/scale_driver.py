"""The lean load generator of section 9: forked processes replaying pre-packed script calls, pipelined.

Each driver process gets its own share of the clients as bytes ready to
write: per Redis node, batches of :data:`BATCH` packed commands. It keeps
:data:`IN_FLIGHT` batches outstanding on each node's socket (so Redis always
has the next batch queued while the driver reads replies), parses replies
with hiredis and checks every one is an admission. Nothing of the request
path runs here: the point is to find what Redis sustains, not what Python can
send.

The parent waits on the same barrier as the drivers, so it reads Redis's CPU
counters (INFO cpu) at the moment the timed window opens and again when it
closes.
"""

from __future__ import annotations

import multiprocessing
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Barrier
from typing import Any

import hiredis
import redis

#: Commands per pipelined batch.
BATCH = 48
#: Batches outstanding per connection: one being answered while the next waits in Redis's input buffer.
IN_FLIGHT = 2
#: Seconds to wait on the barrier before deciding that a process is stuck.
BARRIER_TIMEOUT = 60.0

Address = tuple[str, int]


@dataclass(frozen=True, slots=True)
class DriverLoad:
    """One driver process's work: per node, the batches it writes in a cycle (each :data:`BATCH` replies)."""

    batches: dict[Address, list[bytes]]
    reply_kind: str  # "decide" (a list whose first element is 1) or "limits" (the integer 1)


def batches_of(packed: Sequence[bytes], size: int = BATCH) -> list[bytes]:
    """``packed`` commands cut into batches of exactly ``size``, the last one filled from the start."""
    if not packed:
        return []
    count = -(-len(packed) // size)
    cycle = [packed[i % len(packed)] for i in range(count * size)]
    return [b"".join(cycle[i : i + size]) for i in range(0, len(cycle), size)]


class _Node:
    """A socket to one Redis node and the batches this driver cycles through on it."""

    def __init__(self, address: Address, batches: list[bytes], reply_kind: str) -> None:
        self.sock = socket.create_connection(address, timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reader = hiredis.Reader()
        self.batches = batches
        self.next = 0
        self.decide = reply_kind == "decide"

    def send(self) -> None:
        self.sock.sendall(self.batches[self.next])
        self.next = (self.next + 1) % len(self.batches)

    def read_batch(self) -> None:
        """Read one batch's replies; RuntimeError on anything but an admission."""
        reader, left = self.reader, BATCH
        while left:
            reply = reader.gets()
            if reply is False:
                data = self.sock.recv(1 << 16)
                if not data:
                    raise RuntimeError("Redis closed the connection")
                reader.feed(data)
                continue
            # An error reply is returned (not raised) by hiredis: it fails both checks.
            ok = (type(reply) is list and reply[0] == 1) if self.decide else reply == 1
            if not ok:
                raise RuntimeError(f"a driven command was not an admission: {reply!r}")
            left -= 1

    def close(self) -> None:
        self.sock.close()


def _drive(load: DriverLoad, warmup: float, seconds: float, barrier: Barrier, out: Connection) -> None:
    """A driver process: warm up, wait for everyone, then count admissions for ``seconds``."""
    nodes: list[_Node] = []
    try:
        nodes = [_Node(address, batches, load.reply_kind) for address, batches in load.batches.items()]
        out.send(("ok", *_counted_run(nodes, warmup, seconds, barrier)))
    except BaseException as exc:  # reported to the parent, which fails loudly
        barrier.abort()
        out.send(("error", f"{type(exc).__name__}: {exc}", 0.0, 0.0))
    finally:
        for node in nodes:
            node.close()
        out.close()


def _counted_run(nodes: list[_Node], warmup: float, seconds: float, barrier: Barrier) -> tuple[int, float, float]:
    """Fill every node's pipeline, warm up, wait for every driver, then drive for ``seconds``.

    Returns the admissions counted, the seconds they took, and this process's CPU seconds meanwhile.
    """
    for node in nodes:
        for _ in range(IN_FLIGHT):
            node.send()

    def step() -> None:
        for node in nodes:
            node.read_batch()
            node.send()

    until = time.monotonic() + warmup
    while time.monotonic() < until:
        step()
    barrier.wait(BARRIER_TIMEOUT)
    cpu0, start = time.process_time(), time.monotonic()
    until, steps = start + seconds, 0
    while time.monotonic() < until:
        step()
        steps += 1
    elapsed, cpu = time.monotonic() - start, time.process_time() - cpu0
    for node in nodes:
        for _ in range(IN_FLIGHT):
            node.read_batch()
    return steps * BATCH * len(nodes), elapsed, cpu


def redis_cpu_seconds(clients: Sequence[redis.Redis]) -> float:
    """used_cpu_user + used_cpu_sys (INFO cpu), summed over ``clients``' servers."""
    total = 0.0
    for client in clients:
        info = client.info("cpu")
        total += float(info["used_cpu_user"]) + float(info["used_cpu_sys"])
    return total


def measure(loads: Sequence[DriverLoad], addresses: Sequence[Address], warmup: float, seconds: float) -> dict[str, Any]:
    """Run one driver process per load at once; admissions per second and the Redis CPU it took.

    Raises RuntimeError when a driver fails (an error reply, a refusal, a
    lost connection) or hangs.
    """
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(len(loads) + 1)
    pipes, processes = [], []
    admins = [redis.Redis(host=host, port=port, socket_timeout=5) for host, port in addresses]
    try:
        for load in loads:
            receive, send = context.Pipe(duplex=False)
            process = context.Process(target=_drive, args=(load, warmup, seconds, barrier, send), daemon=True)
            process.start()
            send.close()
            pipes.append(receive)
            processes.append(process)
        try:
            barrier.wait(BARRIER_TIMEOUT)
        except threading.BrokenBarrierError:
            pass  # a driver failed before the start: its error is read below
        else:
            cpu0, wall0 = redis_cpu_seconds(admins), time.monotonic()
            time.sleep(seconds)
            cpu1, wall1 = redis_cpu_seconds(admins), time.monotonic()
        reports = [pipe.recv() if pipe.poll(BARRIER_TIMEOUT + seconds) else ("error", "no report", 0, 0)
                   for pipe in pipes]  # fmt: skip
    finally:
        for process in processes:
            process.join(5)
            if process.is_alive():
                process.kill()
                process.join()
        for pipe in pipes:
            pipe.close()
        for admin in admins:
            admin.close()
    errors = [detail for status, detail, _, _ in reports if status != "ok"]
    if errors:
        raise RuntimeError(f"scale driver failed: {errors[0]}")
    rate = sum(count / elapsed for _, count, elapsed, _ in reports)
    cpu_fraction = (cpu1 - cpu0) / (wall1 - wall0)
    return {
        "drivers": len(loads),
        "decisions": sum(count for _, count, _, _ in reports),
        "seconds": round(wall1 - wall0, 3),
        "decisions_per_s": rate,
        "redis_cpu_pct": 100 * cpu_fraction,
        "redis_cpu_us_per_decision": cpu_fraction / rate * 1e6 if rate else 0.0,
        "per_redis_core": rate / cpu_fraction if cpu_fraction else 0.0,
        "driver_cpu_pct": 100 * sum(cpu / elapsed for _, _, elapsed, cpu in reports),
    }
