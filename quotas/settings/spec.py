"""Every setting of the engine in ``QUOTAS``, described once: type, default, allowed values, check id, hint and doc.

:data:`quotas.settings.quota_settings` reads its defaults from :data:`SETTINGS`,
:func:`quotas.checks.check_settings` validates each value against it, and the
settings tables of docs/settings.md are written from it (``make settings-docs``; a test
fails when they differ). Comments say what a one-line doc cannot. The sections other apps
read (``ADAPTIVE``, ``NOTIFICATIONS``, ``ACL_FEEDS``) are described by those apps and
registered with :mod:`quotas.settings.registry`; the engine's own sections (``METRICS``, ``USAGE_FLUSH``,
``RETENTION``, ``ALLOWANCES``) are described key by key in :mod:`quotas.settings.sections`.
"""

from __future__ import annotations

from decimal import Decimal
from os import PathLike

from . import validators as valid
from .sections import ALLOWANCES, METRICS, RETENTION, SECONDS, USAGE_FLUSH
from .setting import Setting, section
from .validators import ALGORITHMS

FAILURE_MODES = ("local", "open", "closed")

SETTINGS = (
    Setting(
        "ENABLED", bool, True, check_id="quotas.E050",
        doc="`False` turns every limit off (no decision, no headers): for a project's tests, or to take the "
        "platform out of the request path at once; the failed-authentication limits stay on "
        "(`FAILED_AUTH_LIMITS` turns them off)",
        hint="True limits requests; False lets every request through unlimited.",
    ),
    Setting(
        "REDIS_URL", str, "redis://127.0.0.1:6379/0", secret=True, validate=valid.redis_url,
        check_id="quotas.E002",
        doc="the Redis the engine uses: `redis://`, `rediss://`, `unix://`, `redis+sentinel://…`, "
        "`redis+cluster://…` (see Operations), or `memory://` for no Redis: counters in this process, for tests "
        "(see Testing)",
        hint="Use redis://host:6379/0 (rediss:// for TLS, unix:///path.sock), "
        "redis+sentinel://s1:26379,s2:26379/mymaster or redis+cluster://n1:7000,n2:7000.",
    ),
    # The memory store counts per process and forgets on restart: a deployment on it admits N times each limit.
    Setting(
        "ALLOW_MEMORY_STORE_IN_PRODUCTION", bool, False, check_id="quotas.E090",
        doc="`True` lets a process with `DEBUG` off start on `REDIS_URL = 'memory://'` outside tests (one "
        "process that may forget its counters); otherwise that is the start-up error `quotas.E091`, and "
        "gunicorn, the Celery worker and beat refuse to start",
        hint="True only for a single-process deployment that accepts per-process, forgetful limits.",
    ),
    Setting(
        "KEY_PREFIX", str, "quota:v1", validate=valid.key_prefix, check_id="quotas.E003",
        doc="prefix of every Redis key; change it to start afresh",
        hint="Use a short non-empty string without braces or spaces.",
    ),
    # Fewer buckets hold more clients each: less memory per client (about 70 bytes from 10,000
    # clients up), a little more CPU per decision (see quotas/contract/keys.py).
    Setting(
        "KEY_BUCKETS", int, 1024, minimum=1, maximum=1 << 24, check_id="quotas.E014",
        doc="hashes the clients' limit state is spread over (see Keys under Algorithms); fewer: less memory "
        "per client, more: a little less CPU per decision; changing it starts counters afresh",
        hint="More buckets cost less CPU per decision and more memory per client.",
    ),
    Setting(
        "RULES_BACKEND", str | None, None, kind="a dotted path or None", validate=valid.importable,
        check_id="quotas.E004",
        doc="dotted path of the rules backend; `'plans.rules.PlansRulesBackend'` for the database; `None` uses "
        "DRF's rates (compat mode)",
        hint="Use a dotted path such as 'plans.rules.PlansRulesBackend', or None for DRF's rates.",
    ),
    Setting(
        "RULES_CHECK_INTERVAL", float, 1.0, minimum=0, kind=SECONDS, check_id="quotas.E005",
        doc="seconds between each process's checks of the rules version (a background thread; 0 disables "
        "cross-process reloads, and local allowances, which need the thread to give back what they did not use)",
        hint="Rule changes reach every process within this many seconds.",
    ),
    Setting(
        "TRUSTED_PROXIES", list | tuple, [], kind="a list of CIDRs", validate=valid.ip_networks,
        check_id="quotas.E007",
        doc="CIDRs whose `X-Forwarded-For` is believed; `'unix'` for a proxy that reaches the app over a Unix "
        "socket (`REMOTE_ADDR` is no address)",
        hint="Write each proxy as an address or CIDR, e.g. ['10.0.0.0/8', '::1'], or 'unix' for a proxy on a "
        "Unix socket.",
    ),
    Setting(
        "IPV6_PREFIX_LENGTH", int, 64, minimum=1, maximum=128, check_id="quotas.E008",
        doc="IPv6 clients are grouped by this prefix length (one /64 is one client)",
        hint="One client per /64 is what most providers hand out.",
    ),
    Setting(
        "API_KEY_HEADER", str, "X-API-Key", validate=valid.header_name, check_id="quotas.E011",
        doc="the header carrying API keys",
        hint="Use letters, digits and '-' only.",
    ),
    # For a project whose own keys travel in the same header: keys without one of these prefixes are left to
    # the project's own authentication (DRF's next class, Django's middleware), never refused here.
    Setting(
        "API_KEY_PREFIXES", list | tuple, [], kind="a list of prefixes", validate=valid.prefixes,
        check_id="quotas.E054",
        doc="the prefixes of this platform's API keys (the plans app issues `'qk_'`); a key in `API_KEY_HEADER` "
        "without one is not ours: it is left to the project's own authentication and the request is limited "
        "by its user or address. `[]`: every key in the header is ours",
        hint="A list of non-empty strings, e.g. ['qk_'], or [] when only this platform's keys use the header.",
    ),
    Setting(
        "CLIENT_IP", str | None, None, kind="a dotted path or None", validate=valid.importable,
        check_id="quotas.E055",
        doc="dotted path of a callable `(request) -> str | None` naming the client's address everywhere "
        "(limits, failed sign-ins, allow and deny lists), e.g. one around django-ipware's `get_client_ip`; "
        "`None`: `REMOTE_ADDR`, or `X-Forwarded-For` behind `TRUSTED_PROXIES`",
        hint="A dotted path such as 'myproject.net.client_ip', or None.",
    ),
    # Read only for requests that a limit kept to some countries matches (quotas/identity/countries.py);
    # opened once per process, again when QUOTAS changes. E081 checks the file, W082 the limits needing it.
    Setting(
        "GEOIP_COUNTRY_DB", str | PathLike | None, None, kind="a file path or None", check_id="quotas.E080",
        doc="path of a GeoIP2 or GeoLite2 Country or City database (`.mmdb`, the `geoip` extra) giving the "
        "client address's country to limits kept to some countries (see Concepts, Per-country limits); `None`: "
        "no such limit applies",
        hint="Point it at e.g. /var/lib/GeoIP/GeoLite2-Country.mmdb (kept fresh by geoipupdate), or None.",
    ),
    # DRF_ALGORITHM covers REST_FRAMEWORK['DEFAULT_THROTTLE_RATES'], a throttle's rate, a decorator's
    # rate and PATH_LIMITS (quotas.rules.limits.code_rate_algorithm): "N/period" as DRF means it,
    # with Retry-After until the oldest request leaves.
    Setting(
        "DRF_ALGORITHM", str, "sliding_window_log", choices=ALGORITHMS, check_id="quotas.E030",
        doc="algorithm for rates taken from DRF's configuration or given in code (DRF's meaning: at most N in "
        "any rolling period); plans keep their limits' own",
        hint="'sliding_window_log' counts a rate as DRF does.",
    ),
    Setting(
        "SOCKET_TIMEOUT", float, 0.25, minimum=0, kind=SECONDS, check_id="quotas.E005",
        doc="seconds before a Redis read is abandoned",
        hint="A request waits at most this long for Redis before the failure mode applies.",
    ),
    Setting(
        "CONNECT_TIMEOUT", float, 0.05, minimum=0, kind=SECONDS, check_id="quotas.E005",
        doc="seconds before a connection attempt to Redis is abandoned",
        hint="A request waits at most this long for a connection to Redis.",
    ),
    Setting(
        "PROBE_INTERVAL", float, 0.5, minimum=0, kind=SECONDS, check_id="quotas.E005",
        doc="seconds between probes of Redis while the circuit breaker is open",
        hint="Redis is tried again this often while it is unreachable.",
    ),
    Setting(
        "FAILURE_MODE", str, "local", choices=FAILURE_MODES, check_id="quotas.E010",
        doc="while Redis is unreachable: `'local'` enforces this process's share of every limit in memory, "
        "`'open'` admits, `'closed'` refuses with 503 problem+json; left unset, `check` warns (`quotas.W004`): "
        "with `'local'` a project whose Redis is down still answers every request",
        hint="'local' keeps limiting during an outage; 'open' and 'closed' stop limiting or serving.",
    ),
    Setting(
        "LOCAL_SHARE", float, 0.5, exclusive_minimum=0, maximum=1, kind="a fraction", check_id="quotas.E013",
        doc="the share of each limit one process enforces in `'local'` mode (about 1 / worker processes)",
        hint="Use about 1 / the number of worker processes, e.g. 0.25 for 4 gunicorn workers.",
    ),
    # The spool is kept private (0700), one subdirectory per Redis URL and key prefix, each file signed
    # with SECRET_KEY (quotas/store/usage_batches.py). Point it at the project's run or state directory.
    Setting(
        "USAGE_SPOOL_DIR", str | PathLike | None, None, kind="a directory path or None", check_id="quotas.E051",
        doc="where a process exiting during an outage leaves the usage it could not write (`None`: "
        "`quotas-usage-spool-<uid>` in the system temp dir; this project: `run/usage-spool`), replayed by "
        "another exactly once",
        hint="Point it at your project's run or state directory.",
    ),
    Setting(
        "BUDGET_TIME_ZONE", str, "UTC", validate=valid.time_zone, check_id="quotas.E012",
        doc="where budget and period-quota days, weeks and months begin",
        hint="Use an IANA name such as 'UTC' or 'Europe/Berlin'.",
    ),
    Setting(
        "LOCAL_DENY_CACHE_SIZE", int, 10_000, minimum=1, check_id="quotas.E006",
        doc="over-limit clients remembered per process",
        hint="Each remembered client is refused without asking Redis until its wait ends.",
    ),
    Setting(
        "CLIENT_CACHE_SIZE", int, 10_000, minimum=1, check_id="quotas.E006",
        doc="API keys and users whose subscription is cached per process",
        hint="A client not cached costs a database query.",
    ),
    Setting(
        "LEGACY_HEADERS", bool, True, check_id="quotas.E052",
        doc="also send `X-RateLimit-Limit`/`-Remaining`/`-Reset` besides the IETF `RateLimit` headers",
        hint="False sends the IETF RateLimit and RateLimit-Policy headers alone.",
    ),
    Setting(
        "MAX_DELAY_CAP", float, 30.0, minimum=0, kind=SECONDS, check_id="quotas.E005",
        doc="longest `max_delay` a leaky bucket may ask for, in seconds",
        hint="A limit asking for a longer delay gets this one.",
    ),
    # A weight of about 1e12 overflows the scripts' counters.
    Setting(
        "MAX_REQUEST_WEIGHT", int, 1_000_000, minimum=1, maximum=10**12, check_id="quotas.E016",
        doc="largest weight one request may spend (`quota_weight`, `get_quota_weight`); more is a 400 "
        "problem before Redis is asked (a negative one is the view's error)",
        hint="Raise it if your limits count large units such as bytes.",
    ),
    # A query's complexity is its weight (quotas/graphql/complexity.py): the cap cannot pass MAX_REQUEST_WEIGHT
    # (quotas.E059 compares them).
    Setting(
        "GRAPHQL_MAX_COMPLEXITY", int, 1000, minimum=1, maximum=10**12, check_id="quotas.E059",
        doc="largest complexity of a GraphQL query (fields selected, each counted by its depth: see GraphQL) "
        "that `quotas.graphql`'s views answer; a more complex one is a 400 GraphQL error that spends 1 unit; "
        "at most `MAX_REQUEST_WEIGHT`, since a query spends its complexity as its weight",
        hint="Raise it for a schema whose ordinary queries select many nested fields.",
    ),
    # Parsing is the one cost a client can impose before its limits are asked (graphql-core parses about
    # 100,000 tokens a second): these two bound it. Lengths are checked before any parse, tokens during it.
    Setting(
        "GRAPHQL_MAX_QUERY_BYTES", int, 100_000, minimum=1, check_id="quotas.E059",
        doc="longest GraphQL request `quotas.graphql`'s views read: the UTF-8 bytes of its documents (a batch's "
        "added up); a longer one is a 400 GraphQL error (`query_too_large`) that spends 1 unit, and is never "
        "parsed",
        hint="GraphiQL's introspection query is about 1,500 bytes; raise it only for clients that send long "
        "documents.",
    ),
    Setting(
        "GRAPHQL_MAX_TOKENS", int, 10_000, minimum=1, check_id="quotas.E059",
        doc="most tokens (comments included) a GraphQL document may have: graphql-core's parse stops at the "
        "next one, and the request is a 400 GraphQL error (`query_too_large`) that spends 1 unit",
        hint="A query selecting N fields has about 2 N to 5 N tokens; GraphiQL's introspection query has 163.",
    ),
    # At most 10**9: the scripts count micro-units in doubles, exact to 2**53.
    Setting(
        "MAX_REQUEST_COST", int | Decimal | str, 1_000_000, kind="a Decimal, int or str amount",
        validate=valid.request_cost, check_id="quotas.E017",
        doc="largest cost, in currency units, a request may be estimated at (`get_quota_cost`; more is a 400 "
        "problem) or report (`request.quota_cost`); at most `10**9`",
        hint="Give a Decimal, int or str in currency units, never a float.",
    ),
    # See quotas/runtime/shaping.py: a delay that does not fit is refused with 429 and the decision taken back.
    Setting(
        "SHAPING_DELAY_BUDGET", float, 1.0, minimum=0, kind=SECONDS, check_id="quotas.E005",
        doc="seconds of leaky-bucket shaping delay one process may have asleep at once; a delay that does not "
        "fit is a 429 (`reason: shaping_capacity`) and the decision is given back",
        hint="0 refuses every request a leaky bucket would delay.",
    ),
    Setting(
        "SHAPING_DELAY_SHARE", float, 0.25, minimum=0, kind=SECONDS, check_id="quotas.E005",
        doc="seconds of shaping sleep the budget regains per second: at most this share of a process's time "
        "goes to shaping",
        hint="The share of a process's time that may go to sleeping for shaping.",
    ),
    # The most of the budget one client may hold alone; with k clients holding some, each holds at most
    # 1 / (k + 1) of it, and all of them k / (k + 1) (quotas/runtime/shaping.py).
    Setting(
        "SHAPING_CLIENT_SHARE", float, 0.5, exclusive_minimum=0, maximum=1, kind="a fraction",
        check_id="quotas.E047",
        doc="the most of that budget one client may hold; and while `k` clients hold some, each holds at most "
        "`1 / (k + 1)` of it and all of them together `k / (k + 1)`, so a client arriving next always finds "
        "room and none starves the others; 1 turns the per-client limits off",
        hint="0.5: one client may hold at most half of SHAPING_DELAY_BUDGET; 1 turns the share off.",
    ),
    # Per client address: unknown API keys and passwords from new browsers are refused, valid keys
    # answered (quotas/identity/auth_failures.py).
    Setting(
        "FAILED_AUTH_LIMITS", dict | None, {"address": "30/10min", "username": "10/15min", "device": "10/15min"},
        kind="a dict of rates or None", validate=valid.auth_failure_limits, check_id="quotas.E018",
        doc="failed authentications per client address (unknown API keys, passwords from new browsers), per "
        "username (wrong passwords from browsers that never signed in as that user) and per trusted device, "
        "before attempts that cannot succeed are refused with 429 until the window ends (valid keys and "
        "trusted browsers are answered); `None` turns a kind off (the `device` limit off: no browser is "
        "trusted)",
        hint="Map 'address', 'username' and 'device' to rates; None turns one off.",
    ),
    # Each recorded client leaves a Redis list for 24 h, and a client rotating IPv6 prefixes is a new
    # client every time (quotas/observability/refusals.py).
    Setting(
        "REFUSALS_ANONYMOUS_PER_HOUR", int, 1000, minimum=0, check_id="quotas.E048",
        doc="distinct anonymous clients (`ip.*`) whose refusals one process records per hour in the "
        "last-refusals store (see Why was this client refused?); further ones that hour are counted in "
        "`quota_refusal_records_lost_total{reason=\"anonymous_cap\"}`; subscribers and users are never "
        "capped; 0 records none",
        hint="Anonymous clients per process per hour; 0 records no anonymous refusal.",
    ),
    Setting(
        "USAGE_API_RATE", str | None, "120/min", kind="a rate or None", validate=valid.rate,
        check_id="quotas.E049",
        doc="the usage API's rate per client where the client's plan has no limit of scope `usage_api` (which "
        "then replaces it); the usage API is never limited by a plan's other limits nor counted in usage; "
        "`None`: no default",
        hint="A rate such as '120/min; 2000/hour' per client; None leaves the usage API to the plans' "
        "'usage_api' limits alone.",
    ),
    Setting(
        "PATH_LIMITS", list | tuple, [], kind="a list", validate=valid.path_limits, check_id="quotas.E040",
        doc="plain Django views limited by path prefix (`PathQuotaMiddleware`): "
        "`[{'prefix': '/hooks/', 'scope': 'webhook', 'rate': '100/min'}]`, `rate` optional: the plans' "
        "limits of that scope apply, or `DEFAULT_THROTTLE_RATES[scope]` (see Plain Django views)",
        hint="A list of {'prefix': '/hooks/', 'scope': 'webhook', 'rate': '100/min'} ('rate', 'algorithm' "
        "optional).",
    ),
    Setting(
        "DENIAL_RATE_ALERT", float, 0.1, minimum=0, maximum=1, kind="a fraction", check_id="quotas.E046",
        doc="the staff dashboard's denial-rate alert: a plan or scope refusing more than this share of its "
        "requests is marked red and listed; `?alert=` overrides it per page view",
        hint="0.1 alerts when more than 10 % of a plan's or scope's requests are refused.",
    ),
    # A path-absolute reference is resolved by clients against the API's own origin (RFC 9457 recommends
    # the full path for relative types), so every project names its types under its own host without
    # configuring one. Types the IANA registers (quota-exceeded, ...) are never changed.
    Setting(
        "PROBLEM_TYPE_BASE", str, "/problems/", validate=valid.problem_type_base, check_id="quotas.E045",
        doc="where our own problem `type` URIs start (see Problem types): an absolute URI "
        "(`'https://docs.example.com/problems/'`) or a path from the root, ending in `/`, `#` or `:`",
        hint="An absolute URI ('https://docs.example.com/problems/') or a path ('/problems/').",
    ),
    # Off by default: with the API installed but no SDK configured, every span and measurement is the API's
    # no-op, which still costs the request path a few microseconds.
    Setting(
        "OPENTELEMETRY", bool, False, check_id="quotas.E070",
        doc="a span `quota.decision` per decision and OTel metrics beside the Prometheus ones, through the "
        "OpenTelemetry API (the `opentelemetry` extra); exported only where the project configures an SDK (see "
        "Operations, OpenTelemetry)",
        hint="True or False; True needs pip install 'django-quota-platform[opentelemetry]'.",
    ),
    section(
        "METRICS", METRICS, check_id="quotas.E034",
        doc="`/metrics` and the details of `/healthz`",
        hint="A dict of the keys to change; the others keep their defaults.",
    ),
    section(
        "USAGE_FLUSH", USAGE_FLUSH, check_id="quotas.E034",
        doc="the `usage.flush` task",
        hint="A dict of the keys to change; the others keep their defaults.",
    ),
    section(
        "RETENTION", RETENTION, check_id="quotas.E034",
        doc="how long usage records, budget alerts and ban records are kept (the `usage.prune` task)",
        hint="A dict of the keys to change; the others keep their defaults.",
    ),
    section(
        "ALLOWANCES", ALLOWANCES, check_id="quotas.E034",
        doc="local allowances for busy clients",
        hint="A dict of the keys to change; the others keep their defaults.",
    ),
)  # fmt: skip
