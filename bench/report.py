"""The plain-text table printed at the end of a run."""

from __future__ import annotations

from typing import Any

from .count_report import count_section
from .tables import table

#: Targets the run is judged against (printed next to the figures).
QUOTA_5_VS_GET_MAX = 1.5
DRF_VS_GET_EXPECTED = 3.0
BYTES_PER_CLIENT_MAX = 100
FLOOD_ROUND_TRIPS_MAX = 0.05  # at most one Redis round trip per 20 denied requests
#: The targets against limits' sliding window counter (the best peer).
OWN_COST_1_VS_PEER_MAX = 0.95  # own cost p50, 1 limit, as a multiple of limits'
OWN_COST_5_VS_PEER_MAX = 1.0  # own cost p50, 5 limits, as a multiple of limits' (1 limit)
REDIS_CPU_1_VS_PEER_MAX = 1.0  # Redis CPU per allowed decision, 1 limit
REDIS_CPU_5_VS_PEER_MAX = 1.3  # Redis CPU per allowed decision, 5 limits
O1_ALGORITHMS = ("fixed_window", "sliding_window_counter", "token_bucket", "leaky_bucket")

LABELS = {
    "baseline": "no throttle (baseline)",
    "drf_user_rate": "DRF UserRateThrottle, Redis cache",
    "django_ratelimit": "django-ratelimit, Redis cache",
    "limits_moving_window": "limits moving window, Redis",
    "limits_sliding_window": "limits sliding window counter, Redis",
    "one_get": "floor: a throttle doing one GET",
    "quota_1": "QuotaThrottle, 1 limit",
    "quota_1_anon": "QuotaThrottle, 1 limit, anonymous (by address)",
    "quota_5": "QuotaThrottle, 5 limits",
    "quota_10_budget": "QuotaThrottle, 10 limits + budget",
    "redis_get": "bare Redis GET (redis-py)",
    "quota_fixed_window": "QuotaThrottle, fixed_window",
    "quota_token_bucket": "QuotaThrottle, token_bucket",
    "quota_fixed_window_allowances": "QuotaThrottle, fixed_window, allowances on",
    "quota_token_bucket_allowances": "QuotaThrottle, token_bucket, allowances on",
    "no_throttle": "gunicorn, no throttle",
    "quota": "gunicorn, QuotaThrottle",
    "limits_swc": "gunicorn, limits sliding window counter",
}
HTTP_ROWS = ("no_throttle", "quota", "limits_swc")
HTTP_STREAMS = {"allowed": "allowed stream (200s)", "denied": "denied stream (429s when throttled)"}
LATENCY_ROWS = (
    "baseline", "one_get", "drf_user_rate", "django_ratelimit", "limits_moving_window", "limits_sliding_window",
    "quota_1", "quota_1_anon", "quota_5", "quota_10_budget", "redis_get",
)  # fmt: skip
REDIS_COST_LABELS = {
    "quota_1": "QuotaThrottle's decision, 1 limit (token bucket)",
    "quota_1_swc": "QuotaThrottle's decision, 1 limit (sliding window counter)",
    "quota_5": "QuotaThrottle's decision, 5 limits",
    "quota_1_nousage": "the 1-limit decision with usage not counted",
    "limits_swc": "limits sliding window counter",
}
SCALE_LABELS = {
    "quota_1": "decision script, 1 limit",
    "quota_5": "decision script, 5 limits",
    "limits_swc": "limits sliding window counter",
}
RACE_ROWS = (
    "quota_fixed_window", "quota_token_bucket", "quota_fixed_window_allowances", "quota_token_bucket_allowances",
    "drf_user_rate", "django_ratelimit", "limits_moving_window",
    "limits_sliding_window",
)  # fmt: skip


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def targets(results: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """Every target of the sections that ran: (what, the figure, met?)."""
    out = []
    if "latency" in results:
        out += _latency_targets(results["latency"])
    if "hot" in results:
        out += _hot_targets(results["hot"])
    if "redis_cost" in results:
        out += _redis_cost_targets(results["redis_cost"])
    out += _traffic_targets(results)
    for stream in HTTP_STREAMS:
        if stream in results.get("http", {}):
            s = results["http"][stream]
            quota, peer = s["quota"]["rps_ratio"], s["limits_swc"]["rps_ratio"]
            out.append(
                (f"HTTP, {stream} stream: req/s vs no throttle, QuotaThrottle >= limits sliding window counter",
                 f"{quota:.1%} vs {peer:.1%}", s["meets_target"])
            )  # fmt: skip
    o1 = [m for m in results.get("memory", []) if m["algorithm"] in O1_ALGORITHMS]
    if o1:
        worst_mem = max(o1, key=lambda m: m["bytes_per_client"])
        out.append(
            (f"Redis memory per client, O(1) algorithms, one limit <= {BYTES_PER_CLIENT_MAX} bytes",
             f"{worst_mem['bytes_per_client']:.1f} ({worst_mem['algorithm']}, {worst_mem['clients']:,} clients)",
             worst_mem["bytes_per_client"] <= BYTES_PER_CLIENT_MAX)
        )  # fmt: skip
    if "concurrency" in results:
        race = results["concurrency"]
        quota_races = [key for key in RACE_ROWS if key.startswith("quota") and key in race]
        worst = ", ".join(f"{race[key]['max_over']:+d}" for key in quota_races)
        out.append(
            ("QuotaThrottle, 8 processes: zero over-admission", worst,
             all(race[k]["max_over"] <= 0 for k in quota_races))
        )  # fmt: skip
        with_allowances = [key for key in quota_races if key.endswith("_allowances")]
        if with_allowances:
            under = ", ".join(f"{-race[key]['max_under']:+d}" for key in with_allowances)
            out.append(
                ("QuotaThrottle with allowances, 8 processes: at least 95 of 100 admitted", under,
                 all(race[k]["max_under"] <= 5 for k in with_allowances))
            )  # fmt: skip
    if "flood" in results:
        per_denied = results["flood"]["round_trips_per_denied"]
        out.append(
            (f"flood: Redis round trips per denied request <= {FLOOD_ROUND_TRIPS_MAX} (1 in 20)", f"{per_denied:.3f}",
             per_denied <= FLOOD_ROUND_TRIPS_MAX)
        )  # fmt: skip
    return out


HOT_CALLS_MAX = 0.1  # Redis calls per request of one busy client
HOT_OWN_VS_PEER_MAX = 0.5  # its own cost p50, as a multiple of limits' for the same client


def _hot_targets(hot: dict[str, Any]) -> list[tuple[str, str, bool]]:
    out = []
    for key, what in (("quota_1", "1 limit"), ("quota_5", "5 limits")):
        s = hot[key]
        calls, ratio = s["redis_calls_per_request"], s["own_vs_limits"]
        out.append((f"busy client, {what}: Redis calls per request <= {HOT_CALLS_MAX}", f"{calls:.3f}",
                    calls <= HOT_CALLS_MAX))  # fmt: skip
        if ratio is not None:
            out.append((f"busy client, {what}: own cost <= {HOT_OWN_VS_PEER_MAX}x limits'", f"{ratio:.2f}x",
                        ratio <= HOT_OWN_VS_PEER_MAX))  # fmt: skip
    return out


def _latency_targets(lat: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """Section 1-2's targets: against DRF's throttle, a bare GET, and limits' sliding window counter."""
    q5, drf = lat["quota_5"], lat["drf_user_rate"]
    out = [
        (
            "QuotaThrottle 5 limits: own cost <= DRF UserRateThrottle's (1 limit)",
            f"{q5['own_median_us']:.1f} vs {drf['own_median_us']:.1f} us",
            q5["own_median_us"] <= drf["own_median_us"],
        ),
        (
            f"QuotaThrottle 5 limits: own cost <= {QUOTA_5_VS_GET_MAX}x one bare Redis GET",
            f"{q5['own_vs_get']:.2f}x",
            q5["own_vs_get"] <= QUOTA_5_VS_GET_MAX,
        ),
    ]
    peer = lat["limits_sliding_window"]["own_median_us"]
    for key, most in (("quota_1", OWN_COST_1_VS_PEER_MAX), ("quota_5", OWN_COST_5_VS_PEER_MAX)):
        own = lat[key]["own_median_us"]
        out.append(
            (f"{LABELS[key]}: own cost p50 <= {most}x limits' sliding window counter",
             f"{own:.1f} vs {peer:.1f} us ({own / peer:.2f}x)", own <= most * peer)
        )  # fmt: skip
    return out


def _redis_cost_targets(cost: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """Section 10's targets: Redis CPU per allowed decision against limits', on each server."""
    out = []
    for server in cost["servers"]:
        v = server["variants"]
        peer = v["limits_swc"]
        for key, most in (("quota_1", REDIS_CPU_1_VS_PEER_MAX), ("quota_5", REDIS_CPU_5_VS_PEER_MAX)):
            ours = v[key]
            out.append(
                (f"Redis {server['redis_version']} ({server['call']}), {REDIS_COST_LABELS[key]}: Redis CPU per "
                 f"allowed decision <= {most}x limits'",
                 f"{ours['cpu_us']:.1f} vs {peer['cpu_us']:.1f} us ({ours['cpu_us'] / peer['cpu_us']:.2f}x); "
                 f"script {ours['script_us']:.1f} vs {peer['script_us']:.1f} us",
                 ours["cpu_us"] <= most * peer["cpu_us"])
            )  # fmt: skip
    return out


def _latency_section(lat: dict[str, Any]) -> str:
    rows = []
    drf_own = lat["drf_user_rate"]["own_median_us"]
    for key in LATENCY_ROWS:
        if key not in lat:
            continue
        s = lat[key]
        own = ("-", "-", "-", "-") if "own_median_us" not in s else (
            f"{s['own_median_us']:+.1f}", f"{s['own_p99_us']:+.1f}", f"{s['own_vs_get']:.2f}x",
            f"{s['own_vs_floor']:.2f}x" if s.get("own_vs_floor") else "-",
        )  # fmt: skip
        target = ""
        if key == "quota_5":
            ok = s["own_vs_get"] <= QUOTA_5_VS_GET_MAX and s["own_median_us"] <= drf_own
            target = f"<= DRF and <= {QUOTA_5_VS_GET_MAX}x GET  {verdict(ok)}"
        elif key == "one_get":
            target = "the floor (reference)"
        elif key == "drf_user_rate":
            target = f"expected ~{DRF_VS_GET_EXPECTED:.0f}x (reference)"
        elif "own_median_us" in s and not key.startswith("quota"):
            target = "reference"
        rows.append([LABELS[key], f"{s['median_us']:.1f}", f"{s['p99_us']:.1f}", *own, target])
    headers = ["variant", "median us", "p99 us", "own median", "own p99", "own/GET", "own/floor", "target"]
    return table(headers, rows)


def _http_section(http: dict[str, Any]) -> str:
    """One table per stream: each server's req/s and its ratio to the unthrottled server's."""
    tables = []
    for stream, stream_label in HTTP_STREAMS.items():
        s = http[stream]
        rows = []
        for key in HTTP_ROWS:
            v = s[key]
            target = ""
            if key == "quota":
                target = f">= limits' {s['limits_swc']['rps_ratio']:.1%}  {verdict(s['meets_target'])}"
            statuses = ", ".join(f"{n} x {status}" for status, n in sorted(v["statuses"].items()))
            rows.append([LABELS[key], v["requests"], f"{v['rps']:.0f}", f"{v['rps_ratio']:.1%}",
                         f"{v['median_ms']:.2f}", f"{v['p99_ms']:.2f}", statuses, target])  # fmt: skip
        headers = [stream_label, "requests", "req/s", "vs no throttle", "median ms", "p99 ms", "statuses", "target"]
        tables.append(table(headers, rows))
    lag = http.get("usage_write_lag")
    if lag and lag["batches"]:
        tables.append(
            f"usage counted in process (allowances' requests, refusals from memory) reached Redis after "
            f"p50 {lag['p50_s']:.2f} s, p99 {lag['p99_s']:.2f} s ({lag['batches']} batches, "
            "quota_usage_write_lag_seconds, interpolated within its buckets)"
        )
    title = (
        f"GET {http['path']}, gunicorn {http['workers']} sync workers, {http['connections']} connections "
        f"({http['generator']}), {http['rounds']} x {http['seconds_per_run']:g} s per server and stream, rotating;\n"
        "latency: median over runs; 'vs no throttle': median over rounds of req/s over the unthrottled\n"
        "server's in the same round and stream"
    )
    return "\n\n".join([title, *tables])


def _commands_section(cmd: dict[str, Any], flood: dict[str, Any]) -> str:
    calls = cmd["script_calls_per_decision"]
    inside = ", ".join(f"{k} {v:g}" for k, v in sorted(cmd["run_inside_scripts_per_decision"].items()))
    rows = [
        ["FCALL or EVALSHA per decision (commandstats)", f"{calls:.3f}", f"exactly 1  {verdict(calls == 1)}"],
        ["server time per call, us (commandstats)", f"{cmd['script_server_us']:.1f}", ""],
        ["round trips per decision (MONITOR)", f"{cmd['round_trips_per_decision']:.3f}", ""],
        ["all commands per decision (commandstats)", f"{cmd['commandstats_total_per_decision']:.3f}",
         "includes the ones the script runs"],
        [f"flood {flood['limit']}: admitted / denied", f"{flood['admitted']} / {flood['denied']}", ""],
        ["flood: script calls, round trips in total", f"{flood['script_calls']}, {flood['round_trips']}", ""],
        ["flood: round trips per denied request", f"{flood['round_trips_per_denied']:.3f}",
         f"<= {FLOOD_ROUND_TRIPS_MAX}  {verdict(flood['round_trips_per_denied'] <= FLOOD_ROUND_TRIPS_MAX)}"],
    ]  # fmt: skip
    text = table(["QuotaThrottle, 5 limits", "value", "target"], rows)
    return f"{text}\n(run inside the script, per decision: {inside}; {cmd['decisions']} decisions)"


def _memory_section(mem: list[dict[str, Any]]) -> str:
    rows = []
    smallest = {}
    order = list(dict.fromkeys(m["algorithm"] for m in mem))  # as measured
    for m in sorted(mem, key=lambda m: (order.index(m["algorithm"]), m["clients"])):
        first = smallest.setdefault(m["algorithm"], m)
        growth = "" if first is m else f"{m['bytes_per_client'] / first['bytes_per_client']:.2f}x"
        target = "(log: one entry per admitted unit)"
        if m["algorithm"] in O1_ALGORITHMS:
            target = f"<= {BYTES_PER_CLIENT_MAX}  {verdict(m['bytes_per_client'] <= BYTES_PER_CLIENT_MAX)}"
        total_mib = m["bytes_per_client"] * m["clients"] / 2**20
        rows.append([m["algorithm"], m["rate"], m["clients"], f"{m['bytes_per_client']:.1f}", growth,
                     f"{total_mib:.1f}", m["memory_usage_one_key"], target])  # fmt: skip
    example = mem[0]["key_example"] if mem else ""
    headers = ["algorithm", "rate", "clients", "bytes/client", "per client vs 10k", "total MiB",
               "MEMORY USAGE of its key", "target"]  # fmt: skip
    return (
        f"{table(headers, rows)}\n(key example: {example}; the O(1) algorithms keep a field in a bucket hash that\n"
        " many clients share (QUOTAS['KEY_BUCKETS']), the sliding log a sorted set of its own)"
    )


def _race_section(race: dict[str, Any]) -> str:
    rows = []
    for key in RACE_ROWS:
        if key not in race:
            continue
        peer = race[key]
        admitted = ", ".join(str(r["admitted"]) for r in peer["trials"])
        allowed = ", ".join(dict.fromkeys(str(r["allowed"]) for r in peer["trials"]))  # distinct values
        errors = sum(r["errors"] for r in peer["trials"])
        if key.endswith("_allowances"):
            # Never over; under by what sits unused in other processes' allowances when the race ends.
            target = f"none over, >= 95  {verdict(peer['max_over'] <= 0 and peer['max_under'] <= 5)}"
        elif key.startswith("quota"):
            target = f"exact  {verdict(peer['exact'])}"
        elif key == "one_get":
            target = "the floor (reference)"
        elif key == "drf_user_rate":
            target = "reference (DRF usually over-admits)"
        else:
            target = "reference"
        under = f"{-max(0, peer['max_under']):+d}" if "max_under" in peer else ""
        rows.append([LABELS[key], peer["limit"], admitted, allowed, f"{peer['max_over']:+d}", under, errors, target])
    headers = ["throttle", "limit", "admitted per trial", "allowed", "worst over", "worst under", "errors", "target"]
    title = (
        f"{race['processes']} processes, one client, {race['rate']}, "
        f"up to {race['max_requests_per_process']} requests each; "
        "'allowed' adds what a token bucket refills during the race"
    )
    return f"{title}\n{table(headers, rows)}"


def _acl_section(rows: list[dict[str, Any]], get_median_us: float | None) -> str:
    body = table(
        ("entries", "median us", "p99 us", "median / bare GET"),
        [(f"{r['entries']:,}", f"{r['median_us']:.2f}", f"{r['p99_us']:.2f}",
          f"{r['median_us'] / get_median_us:.3f}x" if get_median_us else "-")
         for r in rows],
    )  # fmt: skip
    flat = rows[-1]["median_us"] <= max(2 * rows[1]["median_us"], rows[1]["median_us"] + 1)
    return body + f"\n(flat from 1,000 to 100,000 entries: {verdict(flat)})"


def _redis_cost_section(cost: dict[str, Any]) -> str:
    rows = []
    for server in cost["servers"]:
        for key, figures in server["variants"].items():
            rows.append([
                f"Redis {server['redis_version']} ({server['call'] if key.startswith('quota') else 'EVALSHA'})",
                REDIS_COST_LABELS[key], f"{figures['script_us']:.1f}", f"{figures['cpu_us']:.1f}",
                f"{1e6 / figures['cpu_us']:,.0f}",
            ])  # fmt: skip
    headers = ["server", "variant", "script us", "Redis CPU us", "decisions/s per core"]
    return table(headers, rows)


def _scale_section(scale: dict[str, Any]) -> str:
    rows = []
    for r in scale["rows"]:
        rows.append([
            f"{r['topology']} ({r['shards']} {'shard' if r['shards'] == 1 else 'shards'})", SCALE_LABELS[r["variant"]],
            f"{r['decisions_per_s']:,.0f}", f"{r['redis_cpu_pct']:.0f}%", f"{r['redis_cpu_us_per_decision']:.1f}",
            f"{r['per_redis_core']:,.0f}", r["drivers"], " / ".join(f"{x['decisions_per_s']:,.0f}" for x in r["runs"]),
        ])  # fmt: skip
    ladder = " / ".join(str(n) for n in range(1, scale["max_drivers"] + 1))
    headers = ["topology", "variant", "decisions/s", "Redis CPU", "Redis CPU us/decision", "per Redis core",
               "drivers", f"decisions/s by drivers {ladder}"]  # fmt: skip
    note = (
        f"(pipelined script calls built by the engine / by limits, {scale['clients_per_driver']:,} clients per "
        f"driver process, batches of {scale['batch']}, {scale['seconds_per_run']:g} s a run; Redis CPU: INFO cpu "
        "user+sys over wall time, summed over shards, 100% = one core; per Redis core = decisions/s / that "
        "fraction, the figure that does not depend on how many cores the drivers leave Redis)"
    )
    return f"{table(headers, rows)}\n{note}"


def _connections_section(c: dict[str, Any]) -> str:
    return table(
        ("path", "median us per call"),
        [
            ("held connection + poll for a closed socket (the engine)", f"{c['held_with_poll_us']:.1f}"),
            ("of which the poll alone", f"{c['poll_us']:.1f}"),
            ("redis-py register_script (pool + Retry)", f"{c['redis_py_script_us']:.1f}"),
        ],
    )


def _hot_section(hot: dict[str, Any]) -> str:
    rows = [("no throttle (baseline)", f"{hot['baseline']['median_us']:.1f}", "", "", "")]
    for key in ("quota_1", "quota_5", "limits_sliding_window"):
        s = hot[key]
        rows.append(
            (
                LABELS[key], f"{s['median_us']:.1f}", f"{s['own_median_us']:.1f}", f"{s['own_vs_limits']:.2f}",
                f"{s['redis_calls_per_request']:.3f}",
            )
        )  # fmt: skip
    return table(("variant, one busy client", "p50 us", "own us", "own / limits'", "Redis calls per request"), rows)


TRAFFIC_LABELS = {
    "baseline": "no throttle (baseline)",
    "no_throttle": "no throttle (baseline)",
    "quota": "QuotaThrottle, one limit of 3 windows",
    "drf": "DRF, 3 stacked UserRateThrottles",
    "django_ratelimit": "django-ratelimit, 3 stacked decorators",
    "limits": "limits SWC, 3 hit() calls",
}
TRAFFIC_PEERS = ("drf", "django_ratelimit", "limits")
TRAFFIC_STREAMS = {"zipf": "Zipf traffic", "new_clients": "A new client each request"}


def _traffic_targets(results: dict[str, Any]) -> list[tuple[str, str, bool]]:
    out = []
    if "traffic" in results:
        t = results["traffic"]
        best = min(TRAFFIC_PEERS, key=lambda k: t[k]["own_median_us"])
        ours, theirs = t["quota"]["own_median_us"], t[best]["own_median_us"]
        out.append(
            ("Zipf traffic in process: own cost p50 <= the best peer's", f"{ours:.1f} vs {theirs:.1f} us ({best})",
             ours <= theirs)
        )  # fmt: skip
    for stream, what in TRAFFIC_STREAMS.items():
        if stream in results.get("traffic_http", {}):
            t = results["traffic_http"][stream]
            best = max(TRAFFIC_PEERS, key=lambda k: t[k]["rps_share"])
            ours, theirs = t["quota"]["rps_share"], t[best]["rps_share"]
            out.append(
                (f"{what} over HTTP: req/s share of no throttle >= the best peer's",
                 f"{ours:.1%} vs {theirs:.1%} ({best})", ours >= theirs)
            )  # fmt: skip
    return out


def _traffic_section(t: dict[str, Any]) -> str:
    rows = [(TRAFFIC_LABELS["baseline"], f"{t['baseline']['median_us']:.1f}", f"{t['baseline']['p99_us']:.1f}",
             "", "", "100%", "", "")]  # fmt: skip
    for key in ("quota", *TRAFFIC_PEERS):
        s = t[key]
        rows.append(
            (TRAFFIC_LABELS[key], f"{s['median_us']:.1f}", f"{s['p99_us']:.1f}", f"{s['own_median_us']:.1f}",
             f"{s['own_p99_us']:.1f}", f"{s['rps_share']:.1%}", f"{s['redis_cpu_us']:.1f}", f"{s['round_trips']:.2f}")
        )  # fmt: skip
    headers = ("variant", "p50 us", "p99 us", "own p50", "own p99", "req/s share", "Redis CPU us/req", "round trips")
    return table(headers, rows)


def _traffic_http_section(t: dict[str, Any]) -> str:
    rows = []
    for key in ("no_throttle", "quota", *TRAFFIC_PEERS):
        s = t[key]
        rows.append(
            (TRAFFIC_LABELS[key], f"{s['rps']:.0f}", f"{s['rps_share']:.1%}", f"{s['median_ms']:.2f}",
             f"{s['p99_ms']:.2f}", f"{s['redis_cpu_us']:.1f}")
        )  # fmt: skip
    return table(("server", "req/s", "share", "p50 ms", "p99 ms", "Redis CPU us/req"), rows)


def _traffic_mix(traffic: dict[str, Any]) -> str:
    return (
        f"{traffic['requests']:,} requests from {traffic['distinct_clients']:,} clients, the busiest "
        f"{traffic['busiest_share']:.1%}, {traffic['repeat_share']:.0%} from a client seen before"
    )


def _redis_get_us(results: dict[str, Any]) -> float | None:
    """The median of a bare Redis GET (section 1-2), when it ran."""
    return results["latency"]["redis_get"]["median_us"] if "latency" in results else None


def _header(results: dict[str, Any]) -> str:
    """The machine, the run, its sections and the load around it."""
    m = results["machine"]
    run = results["run"]
    header = (
        f"Machine: {m['cpu_count']} CPUs, Python {m['python']}, redis-server {m['redis_server']}, "
        f"redis-py {m['redis_py']} (hiredis {m['hiredis']}), Django {m['django']}, DRF {m['drf']}\n"
        f"Run: {run['mode']}, {run['rounds']} rounds x {run['requests_per_round']} requests per variant "
        f"(order rotated each round), {run['seconds']:.0f} s in total, {results['timestamp']}"
    )
    if "sections" in run:
        header += f"\nSections: {', '.join(run['sections'])}"
    if "load_average_at_start" in m:
        start, end = m["load_average_at_start"], run["load_average_at_end"]
        header += f"\nLoad average (1, 5, 15 min): {start} at the start, {end} at the end"
    return header


def render(results: dict[str, Any]) -> str:
    """The whole report: the sections that ran, then the targets."""
    sections = [_header(results)]
    if "latency" in results:
        sections.append(
            "1-2. Cost per request: APIRequestFactory + view(request); 'own' = variant minus baseline,\n"
            "     own/GET = own median / bare GET median; own/floor = own median / the floor's (a DRF throttle\n"
            "     that only does one GET: the least any Redis-backed throttle can cost from inside a view)\n"
            + _latency_section(results["latency"])
        )
    sections += _middle_sections(results)
    if "hot" in results:
        sections.append(
            "11. One busy client far below its limit, in process (local allowances on; Redis calls include the\n"
            "     poller's background work)\n" + _hot_section(results["hot"])
        )
    if "traffic" in results:
        sections.append(
            "12. A real API's traffic in process: 10,000 clients drawn from a Zipf distribution, three windows\n"
            "     (per second, minute, day), each peer as its users would; "
            f"{_traffic_mix(results['traffic']['traffic'])}\n" + _traffic_section(results["traffic"])
        )
    if "redis_cost" in results:
        cost = results["redis_cost"]
        sections.append(
            "10. Redis cost per allowed decision: script time (commandstats) and Redis CPU (INFO cpu), the minimum of "
            f"{cost['rounds']} rounds of {cost['decisions_per_round']:,} over {cost['clients']} clients\n"
            + _redis_cost_section(cost)
        )
    if "http" in results:
        title = "6. Over HTTP through gunicorn: QuotaThrottle, the best peer, no throttle"
        sections.append(f"{title}\n{_http_section(results['http'])}")
    if "traffic_http" in results:
        t = results["traffic_http"]
        sections.append(
            "12. A real API's traffic over HTTP through gunicorn (2 sync workers, one API key per client, Redis CPU\n"
            f"     includes every server's idle background work): {_traffic_mix(t['traffic'])}\n"
            + _traffic_http_section(t["zipf"])
            + "\n\n12. The same servers, a new client each request (10,000 API keys in turn)\n"
            + _traffic_http_section(t["new_clients"])
        )
    if "count" in results:
        sections.append(count_section(results["count"]))
    if "redis_count" in results:
        sections.append(_redis_count_section(results["redis_count"]))
    if "scale" in results:
        sections.append(
            "9. Decisions per second one Redis process, and a cluster of 1 and of 3 primaries, sustain "
            f"(the best of 1 to {results['scale']['max_drivers']} driver processes)\n"
            + _scale_section(results["scale"])
        )
    sections.append(_targets_table(results))
    return "\n\n".join(s for s in sections if s)


def _redis_count_section(result: dict[str, Any]) -> str:
    """Section 14: instructions inside redis-server per call, ours beside limits', and the phases."""
    title = "14. CPU instructions per decision inside redis-server (callgrind), ours and limits, by phase"
    if "skipped" in result:
        return f"{title}\n  skipped: {result['skipped']}"
    from .redis_count import format_table  # it imports the contract: only when the section ran

    return f"{title}, {result['calls']} calls each\n{format_table(result)}"


def _middle_sections(results: dict[str, Any]) -> list[str]:
    """Sections 3, 4, 5, 7 and 8, those that ran."""
    sections = []
    if "commands" in results:
        sections.append("3. Redis commands per decision\n" + _commands_section(results["commands"], results["flood"]))
    if "memory" in results:
        sections.append(
            "4. Redis memory per client: one admitted decision each, used_memory growth / clients\n"
            + _memory_section(results["memory"])
        )
    if "concurrency" in results:
        sections.append("5. Over-admission under concurrency\n" + _race_section(results["concurrency"]))
    if "acl" in results:
        sections.append(
            "7. Allow/deny list lookup per request (in-process, no Redis)\n"
            + _acl_section(results["acl"], _redis_get_us(results))
        )
    if "connections" in results:
        sections.append(
            "8. One EVALSHA of a no-op script, client side (quotas/store/transport.py)\n"
            + _connections_section(results["connections"])
        )
    return sections


def _targets_table(results: dict[str, Any]) -> str:
    """Every target of the sections that ran, met or not ("" when none has one)."""
    summary = [[what, figure, verdict(ok)] for what, figure, ok in targets(results)]
    return "Targets\n" + table(["target", "figure", "verdict"], summary) if summary else ""
