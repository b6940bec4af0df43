"""The platform's settings: everything lives in the ``QUOTAS`` dict in Django settings.

Read through :data:`quota_settings`; every attribute is looked up in
``settings.QUOTAS`` on each access (so ``override_settings`` works and nothing
is captured at import time), falling back to :data:`DEFAULTS`. A concern with
several settings is a nested dict (:data:`SECTIONS`): ``QUOTAS['METRICS']``,
``QUOTAS['USAGE_FLUSH']``, and ``QUOTAS['ADAPTIVE']`` (read by
``adaptive.conf.adaptive_settings``, whose defaults live there). A project's
nested dict is merged over the section's defaults key by key.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from quotas.engine.protocol import Algorithm

#: Every setting with its default. The README's settings table mirrors this.
DEFAULTS: dict[str, Any] = {
    # Default: True. False turns every limit off (no decision, no headers, no failed-authentication
    # limits): for a project's tests, or to take the platform out of the request path at once.
    "ENABLED": True,
    # Default: "redis://127.0.0.1:6379/0". One URL: redis://, rediss:// or unix://.
    "REDIS_URL": "redis://127.0.0.1:6379/0",
    # Default: "quota:v1". Every Redis key starts with it; bump it to start afresh.
    "KEY_PREFIX": "quota:v1",
    # Default: 1024. Hashes the clients' limit state is spread over (see quotas/engine/keys.py).
    # Fewer buckets hold more clients each: less memory per client (about 70 bytes
    # from 10,000 clients up), a little more CPU per decision. Changing it starts
    # every client's counters afresh.
    "KEY_BUCKETS": 1024,
    # Default: None. Dotted path to a rules backend class (plans.rules.PlansRulesBackend).
    # None means no database rules: DRF's own throttle rates apply (compat mode).
    "RULES_BACKEND": None,
    # Default: 1.0. Seconds between checks of the rules version in each process.
    "RULES_CHECK_INTERVAL": 1.0,
    # Default: []. CIDRs of reverse proxies whose X-Forwarded-For is believed; "unix"
    # for a proxy that reaches the app over a Unix socket (REMOTE_ADDR is no address).
    "TRUSTED_PROXIES": [],
    # Default: 64. IPv6 clients are grouped by this prefix length (one /64 is one client).
    "IPV6_PREFIX_LENGTH": 64,
    # Default: "X-API-Key". Header carrying the API key.
    "API_KEY_HEADER": "X-API-Key",
    # Default: "sliding_window_log". Algorithm for rates taken from DRF's configuration
    # (REST_FRAMEWORK['DEFAULT_THROTTLE_RATES'] and a throttle's rate): DRF's own meaning of
    # "N/period", at most N in any rolling period, with Retry-After until the oldest request
    # leaves. Plans keep their limits' own algorithms.
    "DRF_ALGORITHM": "sliding_window_log",
    # Default: 0.25. Seconds before a Redis read is abandoned.
    "SOCKET_TIMEOUT": 0.25,
    # Default: "local". What a request gets while Redis is unreachable: "local"
    # enforces this process's share of every limit in memory, "open" admits
    # it, "closed" refuses it with 503.
    "FAILURE_MODE": "local",
    # Default: 0.5. The share of each limit one process enforces in "local"
    # mode: about 1 / the number of worker processes serving the API.
    "LOCAL_SHARE": 0.5,
    # Default: 0.05. Seconds before a connection attempt to Redis is abandoned.
    "CONNECT_TIMEOUT": 0.05,
    # Default: 0.5. Seconds between probes of Redis while the circuit breaker is open.
    "PROBE_INTERVAL": 0.5,
    # Default: None ("quotas-usage-spool-<uid>" in the system temp dir). Where a
    # process that exits during an outage leaves the usage it could not write,
    # for another to replay: kept private (0700), one subdirectory per Redis URL
    # and key prefix, each file signed with SECRET_KEY. Point it at your
    # project's run or state directory.
    "USAGE_SPOOL_DIR": None,
    # Default: 10000. Clients remembered as over-limit in each process.
    "LOCAL_DENY_CACHE_SIZE": 10000,
    # Default: 10000. API keys and users whose subscription is cached in each process.
    "CLIENT_CACHE_SIZE": 10000,
    # Default: True. Send X-RateLimit-Limit/Remaining/Reset besides the IETF headers.
    "LEGACY_HEADERS": True,
    # Default: "UTC". Time zone in which budget and period-quota days, weeks and months begin.
    "BUDGET_TIME_ZONE": "UTC",
    # Default: 30.0. Longest delay a leaky bucket's max_delay may ask for, in seconds.
    "MAX_DELAY_CAP": 30.0,
    # Default: 1000000. Largest weight one request may spend (a view's quota_weight
    # or get_quota_weight). More is refused with 400 before Redis is asked: a
    # weight of about 1e12 overflows the scripts' counters. Raise it (check E016
    # allows up to 1e12) if your limits count large units such as bytes.
    "MAX_REQUEST_WEIGHT": 1_000_000,
    # Default: 1000000. Largest cost, in currency units, one request may be
    # estimated at (get_quota_cost) or report (request.quota_cost). At most 10**9
    # (check E017): the scripts count micro-units in doubles, exact to 2**53.
    "MAX_REQUEST_COST": 1_000_000,
    # Default: 1.0. Seconds of leaky-bucket shaping delay one process may have
    # asleep at once (see quotas/engine/shaping.py); a delay that does not fit is
    # refused with 429 and the decision taken back.
    "SHAPING_DELAY_BUDGET": 1.0,
    # Default: 0.25. Seconds of shaping delay the budget regains per second:
    # the share of a process's time that may go to sleeping for shaping.
    "SHAPING_DELAY_SHARE": 0.25,
    # Default: 0.5. The fraction of that budget one client may have: its own
    # bucket of SHAPING_CLIENT_SHARE * SHAPING_DELAY_BUDGET seconds, regained at
    # SHAPING_CLIENT_SHARE * SHAPING_DELAY_SHARE per second. A delay must fit
    # both, so one client's shaped traffic always leaves the others the rest.
    # A fraction in (0, 1] (check E047); 1 turns the per-client share off.
    "SHAPING_CLIENT_SHARE": 0.5,
    # Default: {"address": "30/10min", "username": "10/15min", "device": "10/15min"}.
    # Failed authentications allowed before attempts that cannot succeed are refused
    # with 429 until the window ends (quotas/identity/auth_failures.py): per client
    # address (unknown API keys and passwords from new browsers are refused; valid
    # keys are answered), per username (wrong passwords from browsers that never
    # signed in as that user), and per trusted device (wrong passwords from a
    # browser that did). None (or a missing kind) turns that limit off.
    "FAILED_AUTH_LIMITS": {"address": "30/10min", "username": "10/15min", "device": "10/15min"},
    # /metrics and the details of /healthz (quotas/http/views.py).
    "METRICS": {
        # Default: "". The bearer token scrapers send (Authorization: Bearer <token>);
        # "" means none: only staff sessions (and loopback peers, see below) get in.
        # Keep it out of the repository: read it from the environment or a secret store.
        "TOKEN": "",
        # Default: False. Serve /metrics without a token to loopback peers when no
        # TOKEN is set. Leave it off behind a reverse proxy on the same host that
        # adds no X-Forwarded-For (nginx's default): every client would look local.
        "ALLOW_LOOPBACK": False,
    },
    # The usage app's flush of Redis counters to the database (usage/flush.py).
    "USAGE_FLUSH": {
        # Default: 500. Usage hashes written per database transaction.
        "BATCH_SIZE": 500,
        # Default: 0.0. Seconds each batch's transaction pauses: a test hook (the
        # worker-kill test widens the window a SIGKILL lands in). Leave it at 0.
        "BATCH_DELAY": 0.0,
    },
    # Default: {}. The adaptive app's settings: every key and its default in
    # adaptive/conf.py (validated by adaptive/checks.py when adaptive is installed).
    "ADAPTIVE": {},
    # Default: 1000. Distinct anonymous clients (ip.* tags) whose refusals one process records
    # per hour in the last-refusals store (quotas/observability/refusals.py): each leaves a
    # Redis list for 24 h, and a client rotating IPv6 prefixes is a new client every time.
    # Refusals of further anonymous clients that hour are counted in
    # quota_refusal_records_lost_total{reason="anonymous_cap"}; subscribers and users are
    # never capped so. An int >= 0 (check E048); 0 records no anonymous refusal.
    "REFUSALS_ANONYMOUS_PER_HOUR": 1000,
    # Default: "120/min". The usage API's rate per client (usage.throttling.UsageAPIThrottle)
    # where the client's plan has no limit of scope "usage_api" (which then replaces it).
    # The usage API is never limited by a plan's other limits, nor counted in usage.
    # A rate such as "120/min; 2000/hour", or None for no default (check E049).
    "USAGE_API_RATE": "120/min",
    # Default: []. Plain Django views limited by path prefix (quotas.django.middleware.PathQuotaMiddleware):
    # a list of {"prefix": "/hooks/", "scope": "webhook", "rate": "100/min"} ("rate" optional: the
    # plans' limits of that scope apply, or DEFAULT_THROTTLE_RATES[scope] while there is no plan).
    "PATH_LIMITS": [],
    # Default: 0.1. The staff dashboard's denial-rate alert: a plan or scope whose
    # share of refused requests (refused / all) is above it is marked, and listed
    # (dashboard/history.py). A fraction from 0 to 1 (check E046); a page view may
    # override it with ?alert=0.05.
    "DENIAL_RATE_ALERT": 0.1,
    # Default: "/problems/". Where the `type` URIs of this project's own problem
    # bodies (RFC 9457) start: "/problems/invalid-api-key", ... A path-absolute
    # reference, which clients resolve against the API's own origin (RFC 9457
    # recommends the full path for relative types), so every project names its
    # types under its own host without configuring one. Set an absolute URL
    # ("https://docs.example.com/problems/") to point clients at your docs.
    # Types the IANA registers (quota-exceeded, ...) are never changed.
    "PROBLEM_TYPE_BASE": "/problems/",
}

#: Settings that are nested dicts of their own keys, merged over their defaults key by key.
#: (ADAPTIVE is one too, but its keys and defaults belong to the adaptive app.)
SECTIONS = ("METRICS", "USAGE_FLUSH")


#: The algorithms a limit may name (periods and budgets have models of their own).
ALGORITHMS = tuple(a.setting_name for a in Algorithm if a.rolling or a is Algorithm.CONCURRENCY)
FAILURE_MODES = ("local", "open", "closed")


class QuotaSettings:
    """Attribute access to ``settings.QUOTAS`` with :data:`DEFAULTS` filled in.

    A section (``quota_settings.METRICS``) is a new dict: its defaults, then
    the project's ``QUOTAS[section]``. A section that is not a dict reads as its defaults
    (system check quotas.E034 reports it).
    """

    def __getattr__(self, name: str) -> Any:
        if name not in DEFAULTS:
            raise AttributeError(f"Invalid QUOTAS setting: {name!r}")
        user = self.user_settings()
        if not isinstance(user, dict):
            user = {}
        if name not in SECTIONS:
            return user.get(name, DEFAULTS[name])
        given = user.get(name)
        values = dict(DEFAULTS[name])
        if isinstance(given, dict):
            values.update(given)
        return values

    def user_settings(self) -> Any:
        """The raw ``QUOTAS`` value from Django settings (for checks); ``{}`` when unset."""
        value = getattr(settings, "QUOTAS", None)
        return value if value is not None else {}


quota_settings = QuotaSettings()
