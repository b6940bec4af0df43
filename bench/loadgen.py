"""Bounded HTTP load against a server on 127.0.0.1: ``wrk`` when installed, else forked Python clients.

Either way a run lasts ``duration`` seconds with ``connections`` requests in
flight, and reports requests per second, the median and p99 latency, and how
many responses had each HTTP status (the caller checks they are all the one
it expects: 200 for a client under its limits, 429 for one far over).
"""

from __future__ import annotations

import http.client
import multiprocessing as mp
import re
import shutil
import subprocess
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .stats import percentile

#: The Python clients' cap on requests per process per run, whatever the duration.
MAX_REQUESTS_PER_CLIENT = 200_000

_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1000.0}
#: Makes wrk count responses by status (its own report only counts the non-2xx ones).
WRK_SCRIPT = Path(__file__).with_name("wrk_statuses.lua")


@dataclass(frozen=True, slots=True)
class LoadResult:
    requests: int
    seconds: float
    rps: float
    median_ms: float
    p99_ms: float
    non_2xx: int
    errors: int
    generator: str
    statuses: dict[int, int]  # HTTP status -> responses

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def generator_name() -> str:
    return "wrk" if shutil.which("wrk") else "python"


def run(
    port: int, path: str, headers: dict[str, str] | Sequence[dict[str, str]], duration: float, connections: int
) -> LoadResult:
    """One load run against ``http://127.0.0.1:port{path}``.

    ``headers`` is every request's, or a sequence the requests take in turn (each Python client starting at
    its own offset): many clients, one per header set. A sequence is sent by the Python clients only.
    """
    if isinstance(headers, dict):
        if shutil.which("wrk"):
            return _wrk(port, path, headers, duration, connections)
        headers = [headers]
    return _python(port, path, headers, duration, connections)


def _ms(text: str) -> float:
    match = re.fullmatch(r"([\d.]+)(us|ms|s)", text)
    if match is None:
        raise ValueError(f"unexpected wrk latency {text!r}")
    return float(match.group(1)) * _UNITS[match.group(2)]


def _wrk(port: int, path: str, headers: dict[str, str], duration: float, connections: int) -> LoadResult:
    argv = ["wrk", "-t1", f"-c{connections}", f"-d{max(1, round(duration))}s", "--latency", "--timeout", "5s",
            "-s", str(WRK_SCRIPT)]  # fmt: skip
    for name, value in headers.items():
        argv += ["-H", f"{name}: {value}"]
    argv.append(f"http://127.0.0.1:{port}{path}")
    out = subprocess.run(argv, capture_output=True, text=True, timeout=duration + 30, check=True).stdout
    done = re.search(r"(\d+) requests in ([\d.]+)(us|ms|s)", out)
    latency = dict(re.findall(r"^\s+(50|99)%\s+(\S+)$", out, re.MULTILINE))
    if done is None or set(latency) != {"50", "99"}:
        raise RuntimeError(f"could not read wrk's report:\n{out}")
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    requests, seconds = int(done.group(1)), _ms(done.group(2) + done.group(3)) / 1000
    statuses = Counter[int]()
    for status, count in re.findall(r"^status (\d+) (\d+)$", out, re.MULTILINE):
        statuses[int(status)] += int(count)
    return LoadResult(
        requests=requests,
        seconds=round(seconds, 3),
        rps=round(requests / seconds, 1),
        median_ms=round(_ms(latency["50"]), 3),
        p99_ms=round(_ms(latency["99"]), 3),
        non_2xx=int(non_2xx.group(1)) if non_2xx else 0,
        errors=sum(int(g) for g in errors.groups()) if errors else 0,
        generator="wrk",
        statuses=dict(sorted(statuses.items())),
    )


def _client(port: int, path: str, headers: Sequence[dict[str, str]], offset: int, deadline: float, out: Any) -> None:  # noqa: PLR0917
    """One forked client, sending ``headers`` in turn from ``offset``: requests one after another, a new connection
    each, until the deadline."""
    samples: list[int] = []
    statuses = Counter[int]()
    errors = 0
    sent = offset
    while time.time() < deadline and len(samples) < MAX_REQUESTS_PER_CLIENT:
        request_headers = headers[sent % len(headers)]
        sent += 1
        start = time.perf_counter_ns()
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", path, headers=request_headers)
            response = conn.getresponse()
            response.read()
            conn.close()
        except OSError:
            errors += 1
            continue
        samples.append(time.perf_counter_ns() - start)
        statuses[response.status] += 1
    out.put((samples, statuses, errors))


def _python(port: int, path: str, headers: Sequence[dict[str, str]], duration: float, connections: int) -> LoadResult:
    ctx = mp.get_context("fork")
    out = ctx.SimpleQueue()
    started = time.time()
    offsets = [i * len(headers) // connections for i in range(connections)]
    procs = [
        ctx.Process(target=_client, args=(port, path, headers, offset, started + duration, out), daemon=True)
        for offset in offsets
    ]
    for proc in procs:
        proc.start()
    results = [out.get() for _ in procs]
    seconds = time.time() - started
    for proc in procs:
        proc.join(timeout=10)
    samples = sorted(s for r in results for s in r[0])
    statuses = sum((r[1] for r in results), Counter[int]())
    return LoadResult(
        requests=len(samples),
        seconds=round(seconds, 3),
        rps=round(len(samples) / seconds, 1),
        median_ms=round(percentile(samples, 0.5) / 1e6, 3),
        p99_ms=round(percentile(samples, 0.99) / 1e6, 3),
        non_2xx=sum(n for status, n in statuses.items() if not 200 <= status < 300),
        errors=sum(r[2] for r in results),
        generator="python",
        statuses=dict(sorted(statuses.items())),
    )
