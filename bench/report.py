"""The plain-text table printed at the end of a run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: Targets the run is judged against (printed next to the figures).
QUOTA_5_VS_GET_MAX = 1.5
DRF_VS_GET_EXPECTED = 3.0
BYTES_PER_CLIENT_MAX = 100
O1_ALGORITHMS = ("fixed_window", "sliding_window_counter", "token_bucket", "leaky_bucket")

LABELS = {
    "baseline": "no throttle (baseline)",
    "drf_user_rate": "DRF UserRateThrottle, Redis cache",
    "quota_1": "QuotaThrottle, 1 limit",
    "quota_5": "QuotaThrottle, 5 limits",
    "redis_get": "bare Redis GET (redis-py)",
    "quota_fixed_window": "QuotaThrottle, fixed_window",
    "quota_token_bucket": "QuotaThrottle, token_bucket",
}


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Columns padded to their widest cell; the first column left-aligned, the rest right."""
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]

    def line(row: Sequence[str]) -> str:
        parts = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(cells[0]), rule, *(line(r) for r in cells[1:])])


def _latency_section(lat: dict[str, Any]) -> str:
    rows = []
    for key in ("baseline", "drf_user_rate", "quota_1", "quota_5", "redis_get"):
        s = lat[key]
        own = ("-", "-", "-") if "own_median_us" not in s else (
            f"{s['own_median_us']:+.1f}", f"{s['own_p99_us']:+.1f}", f"{s['own_vs_get']:.2f}x"
        )  # fmt: skip
        target = ""
        if key == "quota_5":
            target = f"<= {QUOTA_5_VS_GET_MAX}x  {verdict(s['own_vs_get'] <= QUOTA_5_VS_GET_MAX)}"
        elif key == "drf_user_rate":
            target = f"expected ~{DRF_VS_GET_EXPECTED:.0f}x (reference)"
        rows.append([LABELS[key], f"{s['median_us']:.1f}", f"{s['p99_us']:.1f}", *own, target])
    headers = ["variant", "median us", "p99 us", "own median", "own p99", "own/GET", "target"]
    return table(headers, rows)


def _commands_section(cmd: dict[str, Any], flood: dict[str, Any]) -> str:
    evalsha = cmd["evalsha_per_decision"]
    inside = ", ".join(f"{k} {v:g}" for k, v in sorted(cmd["run_inside_scripts_per_decision"].items()))
    rows = [
        ["EVALSHA per decision (commandstats)", f"{evalsha:.3f}", f"exactly 1  {verdict(evalsha == 1)}"],
        ["server time per EVALSHA, us (commandstats)", f"{cmd['evalsha_server_us']:.1f}", ""],
        ["round trips per decision (MONITOR)", f"{cmd['round_trips_per_decision']:.3f}", ""],
        ["all commands per decision (commandstats)", f"{cmd['commandstats_total_per_decision']:.3f}",
         "includes the ones the script runs"],
        [f"flood {flood['limit']}: admitted / denied", f"{flood['admitted']} / {flood['denied']}", ""],
        ["flood: EVALSHA, round trips in total", f"{flood['evalsha']}, {flood['round_trips']}", ""],
        ["flood: round trips per denied request", f"{flood['round_trips_per_denied']:.3f}",
         f"~0  {verdict(flood['round_trips_per_denied'] <= 0.05)}"],
    ]  # fmt: skip
    text = table(["QuotaThrottle, 5 limits", "value", "target"], rows)
    return f"{text}\n(run inside the script, per decision: {inside}; {cmd['decisions']} decisions)"


def _memory_section(mem: list[dict[str, Any]]) -> str:
    rows = []
    for m in mem:
        target = "(log: one entry per admitted unit)"
        if m["algorithm"] in O1_ALGORITHMS:
            target = f"<= {BYTES_PER_CLIENT_MAX}  {verdict(m['bytes_per_client'] <= BYTES_PER_CLIENT_MAX)}"
        rows.append([m["algorithm"], m["rate"], m["clients"], f"{m['bytes_per_client']:.1f}",
                     m["memory_usage_one_key"], target])  # fmt: skip
    example = mem[0]["key_example"] if mem else ""
    headers = ["algorithm", "rate", "clients", "bytes/client", "MEMORY USAGE 1 key", "target"]
    return f"{table(headers, rows)}\n(key example: {example})"


def _race_section(race: dict[str, Any]) -> str:
    rows = []
    for key in ("quota_fixed_window", "quota_token_bucket", "drf_user_rate"):
        peer = race[key]
        admitted = ", ".join(str(r["admitted"]) for r in peer["trials"])
        allowed = ", ".join(dict.fromkeys(str(r["allowed"]) for r in peer["trials"]))  # distinct values
        errors = sum(r["errors"] for r in peer["trials"])
        if key.startswith("quota"):
            target = f"exact  {verdict(peer['exact'])}"
        else:
            target = "reference (DRF usually over-admits)"
        rows.append([LABELS[key], peer["limit"], admitted, allowed, f"{peer['max_over']:+d}", errors, target])
    headers = ["throttle", "limit", "admitted per trial", "allowed", "worst over", "errors", "target"]
    title = (
        f"{race['processes']} processes, one client, {race['rate']}, "
        f"up to {race['max_requests_per_process']} requests each; "
        "'allowed' adds what a token bucket refills during the race"
    )
    return f"{title}\n{table(headers, rows)}"


def render(results: dict[str, Any]) -> str:
    """The whole report."""
    m = results["machine"]
    run = results["run"]
    lat = results["latency"]
    header = (
        f"Machine: {m['cpu_count']} CPUs, Python {m['python']}, redis-server {m['redis_server']}, "
        f"redis-py {m['redis_py']} (hiredis {m['hiredis']}), Django {m['django']}, DRF {m['drf']}\n"
        f"Run: {run['mode']}, {run['rounds']} rounds x {run['requests_per_round']} requests per variant "
        f"(order rotated each round), {run['seconds']:.0f} s in total, {results['timestamp']}"
    )
    sections = [
        header,
        "1-2. Cost per request: APIRequestFactory + view(request); 'own' = variant minus baseline,\n"
        "     own/GET = own median / bare GET median\n" + _latency_section(lat),
        "3. Redis commands per decision\n" + _commands_section(results["commands"], results["flood"]),
        "4. Redis memory per client: one admitted decision each, used_memory growth / clients\n"
        + _memory_section(results["memory"]),
        "5. Over-admission under concurrency\n" + _race_section(results["concurrency"]),
    ]
    return "\n\n".join(sections)
