"""Settings for the quota platform project.

Everything that differs between machines comes from the environment (see the
table of variables in docs/settings.md); every default works on a fresh checkout.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import dj_database_url
import environ
from django.core.exceptions import ImproperlyConfigured
from kombu import Queue

from config.secret_key import ensure_key, key_file, read_key, run_dir

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()

RUN_DIR = run_dir()
DEBUG = env.bool("DEBUG", default=False)
# No key is written in this repository: the environment's, else the one `make run` generated in
# RUN_DIR (see config/secret_key.py). With neither, only a DEBUG process may make one up (in RUN_DIR,
# so the next command finds the same key); a deployment (DEBUG off) refuses to start.
SECRET_KEY = env.str("SECRET_KEY", default="") or read_key(RUN_DIR)
if not SECRET_KEY and DEBUG:
    SECRET_KEY = ensure_key(RUN_DIR)
    warnings.warn(
        f"SECRET_KEY is not set: DEBUG generated one in {key_file(RUN_DIR)}. Set SECRET_KEY in a deployment.",
        stacklevel=1,
    )
if not SECRET_KEY:
    raise ImproperlyConfigured(
        "SECRET_KEY is not set. Set the SECRET_KEY environment variable (a long random string, kept secret), "
        f"or run `make run` once in this checkout to generate {key_file(RUN_DIR)}."
    )
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

# HTTPS (`manage.py check --deploy`; see "Deployment settings" in docs/security.md). With DEBUG off, plain HTTP is
# redirected and cookies go over HTTPS only; `make run` (config/run.py), which serves plain HTTP on loopback,
# turns these three off for itself.
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=not DEBUG)
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=not DEBUG)
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=not DEBUG)
# HSTS tells browsers never to use plain HTTP here again, which cannot be taken back before max-age runs out: it
# stays off until a deployment sets it (start small, e.g. 3600, then a year). Subdomains and the browsers' preload
# list are the domain owner's decision.
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=False)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=False)
# Behind a proxy that terminates TLS: the header by which it says the client used HTTPS, as `Name` (value "https",
# e.g. X-Forwarded-Proto) or `Name=value` (e.g. X-Forwarded-Ssl=on). Unset: none is believed. Only where that proxy
# sets the header on every request and drops a client's own, or any client could claim HTTPS.
_proxy_ssl_header = env.str("SECURE_PROXY_SSL_HEADER", default="")
if _proxy_ssl_header:
    _name, _, _value = (part.strip() for part in _proxy_ssl_header.partition("="))
    if not re.fullmatch(r"[A-Za-z0-9-]+", _name):
        raise ImproperlyConfigured(
            f"SECURE_PROXY_SSL_HEADER={_proxy_ssl_header!r}: expected a header name, optionally with =value "
            "(e.g. X-Forwarded-Proto or X-Forwarded-Ssl=on)."
        )
    SECURE_PROXY_SSL_HEADER = ("HTTP_" + _name.upper().replace("-", "_"), _value or "https")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "quotas",
    "plans",
    "adaptive",
    "dashboard",
    "demo",
]
INSTALLED_APPS += ["usage"]  # usage accounting: Redis counters flushed to the database, usage-report API
INSTALLED_APPS += ["notifications"]  # signed webhooks and e-mail to customers (budget thresholds, ...)
INSTALLED_APPS += ["console"]  # customers manage their own subscription: keys, webhooks, caps, members

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Answers a sign-in refused for too many failures with a 429 and sets the trusted-device cookie; before the
    # headers middleware, so it sees the response once the request's quota decisions are settled.
    "quotas.middleware.SignInThrottleMiddleware",
    # Adds the rate-limit headers and problem+json bodies decided by QuotaThrottle.
    "quotas.middleware.QuotaHeadersMiddleware",
]
# Each process that serves requests publishes its host's load for the adaptive controller (a background thread).
MIDDLEWARE += ["adaptive.middleware.LoadReporterMiddleware"]

# The first backend only refuses clients over QUOTAS['FAILED_AUTH_LIMITS'], before a password is hashed.
AUTHENTICATION_BACKENDS = ["quotas.identity.backends.FailedAuthBackend", "django.contrib.auth.backends.ModelBackend"]

ROOT_URLCONF = "config.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

WSGI_APPLICATION = "config.wsgi.application"


def _use_pure_python_mysql_driver() -> None:
    """Let Django's MySQL backend run on PyMySQL where mysqlclient is not installed.

    mysqlclient compiles against the MySQL client library; PyMySQL is pure Python, so a machine with
    Python alone can reach MariaDB or MySQL (the usage flush's MariaDB tests do).
    """
    try:
        import MySQLdb  # noqa: F401  (mysqlclient, when a deployment installed it)
    except ImportError:
        import pymysql

        pymysql.install_as_MySQLdb()


# SQLite by default; DATABASE_URL=postgres://... selects PostgreSQL with
# Django's native psycopg pool (which requires persistent connections off).
DATABASE_URL = env.str("DATABASE_URL", default="")
if DATABASE_URL:
    # Health checks: the pool tests a connection at checkout, so one the server dropped (a restart, an
    # outage) is replaced instead of failing a request each (one empty round trip per checkout).
    _db = dj_database_url.parse(DATABASE_URL, conn_max_age=0, conn_health_checks=True)
    if _db["ENGINE"] == "django.db.backends.postgresql":
        _db.setdefault("OPTIONS", {})["pool"] = {
            "min_size": env.int("DB_POOL_MIN_SIZE", default=1),
            "max_size": env.int("DB_POOL_MAX_SIZE", default=10),
            "timeout": env.float("DB_POOL_TIMEOUT", default=10.0),
        }
    if _db["ENGINE"] == "django.db.backends.mysql":
        _use_pure_python_mysql_driver()
    DATABASES = {"default": _db}
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": env.str("SQLITE_PATH", default=str(BASE_DIR / "db.sqlite3")),
            "OPTIONS": {"timeout": 20},
        }
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = RUN_DIR / "static"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True

LOGIN_URL = "admin:login"

# One Redis URL for everything: the quota engine, Celery's broker and results.
# `make run` starts an embedded redis-server and exports REDIS_URL when unset.
REDIS_URL = env.str("REDIS_URL", default="redis://127.0.0.1:6379/0")

REST_FRAMEWORK = {
    "DEFAULT_THROTTLE_CLASSES": ["quotas.throttling.QuotaThrottle"],
    # 429/503 problem+json and the RateLimit headers on throttled operations (quotas/openapi.py).
    "DEFAULT_SCHEMA_CLASS": "quotas.openapi.QuotaAutoSchema",
    # Quota refusals (429, 403, 401, 503, 400) as application/problem+json; other errors as DRF's default.
    "EXCEPTION_HANDLER": "quotas.drf.handlers.exception_handler",
    # API keys first: DRF answers an authentication failure with the first class's challenge (401), or 403.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "quotas.drf.authentication.APIKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.BasicAuthentication",
    ],
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Quota platform API",
    "DESCRIPTION": "Demo API protected by QuotaThrottle, and the platform's own endpoints.",
    "VERSION": "0.1.0",
    # Two choice sets share the field name "state" in the console's API (a key's, and a cap's spend): each its own
    # enum, named here (drf-spectacular warns, drf_spectacular.W001, and names them by a hash otherwise).
    "ENUM_NAME_OVERRIDES": {"KeyStateEnum": "plans.models.keys.KeyState", "SpendStateEnum": "console.spend.STATES"},
}

# Seconds between adaptive controller runs: QUOTAS['ADAPTIVE']['INTERVAL'] and the beat schedule below agree.
_adaptive_interval = env.float("ADAPTIVE_INTERVAL", default=5.0)
# Seconds between refreshes of the allow and deny list feeds: QUOTAS['ACL_FEEDS']['INTERVAL'] and beat agree.
_acl_feeds_interval = env.float("ACL_FEEDS_INTERVAL", default=3_600.0)
# Everything the platform's apps read (quotas, plans, usage, adaptive) is in QUOTAS; see docs/settings.md.
QUOTAS = {
    "REDIS_URL": REDIS_URL,
    "RULES_BACKEND": "plans.rules.PlansRulesBackend",
    "TRUSTED_PROXIES": env.list("QUOTAS_TRUSTED_PROXIES", default=[]),
    # While Redis is unreachable: "local" (each process enforces LOCAL_SHARE of every limit), "open" or "closed".
    "FAILURE_MODE": env.str("QUOTAS_FAILURE_MODE", default="local"),
    # memory:// with DEBUG off is a start-up error (quotas.E091) unless this says a single process may forget.
    "ALLOW_MEMORY_STORE_IN_PRODUCTION": env.bool("QUOTAS_ALLOW_MEMORY_STORE_IN_PRODUCTION", default=False),
    "LOCAL_SHARE": env.float("QUOTAS_LOCAL_SHARE", default=0.5),
    # Usage a process could not write at exit (Redis down), kept private to this checkout's run directory.
    "USAGE_SPOOL_DIR": str(RUN_DIR / "usage-spool"),
    # /metrics and /healthz's details: the scrapers' bearer token (unset: staff sessions only).
    "METRICS": {"TOKEN": env.str("METRICS_TOKEN", default="")},
    # usage.flush: keys per transaction, and a test hook sleeping inside each (widens the kill window).
    "USAGE_FLUSH": {
        "BATCH_SIZE": env.int("USAGE_FLUSH_BATCH_SIZE", default=500),
        "BATCH_DELAY": env.float("USAGE_FLUSH_BATCH_DELAY", default=0.0),
    },
    # Adaptive limits: every key and its default is documented in adaptive/conf.py. (The test suite turns the
    # load reporter off in tests/conftest.py; tests/adaptive turns it on where it is tested.)
    "ADAPTIVE": {
        "INTERVAL": _adaptive_interval,
        "REPORT_INTERVAL": env.float("ADAPTIVE_REPORT_INTERVAL", default=1.0),
    },
    # Allow and deny lists kept from feeds (plans/conf.py documents every key): https:// URLs on public addresses.
    "ACL_FEEDS": {"INTERVAL": _acl_feeds_interval},
}

# The broker follows REDIS_URL, but never to memory://: kombu reads that as its in-process transport, where beat's
# tasks never reach a worker. With the memory store (tests, DEBUG development) the broker stays on Redis.
CELERY_BROKER_URL = env.str(
    "CELERY_BROKER_URL", default="redis://127.0.0.1:6379/0" if REDIS_URL.startswith("memory:") else REDIS_URL
)
# A redis+sentinel:// URL (quotas.api.celery_sentinel_broker) in kombu's form: one sentinel:// URL per Sentinel
# joined by ";", the service name as the master_name transport option. kombu's Redis transport cannot use a Redis
# Cluster: with a redis+cluster:// REDIS_URL, set CELERY_BROKER_URL to a plain Redis (redis://) or RabbitMQ (amqp://).
if CELERY_BROKER_URL.startswith("redis+sentinel://"):
    from quotas.api import celery_sentinel_broker

    CELERY_BROKER_URL, CELERY_BROKER_TRANSPORT_OPTIONS = celery_sentinel_broker(CELERY_BROKER_URL)
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
# Every task ends: a soft limit raises SoftTimeLimitExceeded in it, the hard one replaces its worker process.
# The platform's tasks carry their own (tighter) limits; these bound any other task of the project.
CELERY_TASK_SOFT_TIME_LIMIT = 300
CELERY_TASK_TIME_LIMIT = 360
# The webhook dispatcher has a queue of its own, consumed by a worker of its own (the Procfile's `notifier`), so
# receivers taking their time never hold up the usage flush, the controller, the feeds or the watcher. A worker
# started without --queues consumes both queues, so a single worker still runs everything.
CELERY_TASK_QUEUES = (Queue("celery"), Queue("notifications"))
CELERY_TASK_ROUTES = {"notifications.dispatch": {"queue": "notifications"}}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TIMEZONE = "UTC"
CELERY_BEAT_SCHEDULE: dict[str, dict] = {}
# Copy the decision script's usage counters from Redis to the database (idempotent, safe to overlap).
CELERY_BEAT_SCHEDULE["usage-flush"] = {"task": "usage.flush", "schedule": 60.0, "options": {"expires": 55}}
# Delete what QUOTAS['RETENTION'] no longer keeps (usage records, budget alerts, ban records), once a day.
CELERY_BEAT_SCHEDULE["usage-prune"] = {"task": "usage.prune", "schedule": 86_400.0, "options": {"expires": 3_600}}

# Send the webhooks and e-mails that are due (notifications.dispatch; safe to overlap: each delivery is locked).
CELERY_BEAT_SCHEDULE["notifications-dispatch"] = {
    "task": "notifications.dispatch",
    "schedule": 5.0,
    "options": {"expires": 5.0},
}
# Find what no signal reports: bans started and ended, keys about to expire, sustained refusals.
CELERY_BEAT_SCHEDULE["notifications-watch"] = {
    "task": "notifications.watch",
    "schedule": 60.0,
    "options": {"expires": 55.0},
}

# The load controller: reads the hosts' samples, publishes per-plan multipliers. A late run is dropped, not queued.
CELERY_BEAT_SCHEDULE["adaptive-control"] = {
    "task": "adaptive.control",
    "schedule": _adaptive_interval,
    "options": {"expires": _adaptive_interval},
}

# Fetch the allow and deny list feeds; a good list replaces the last, a failing feed keeps it (plans.feeds).
CELERY_BEAT_SCHEDULE["acl-feeds-refresh"] = {
    "task": "plans.refresh_acl_feeds",
    "schedule": _acl_feeds_interval,
    "options": {"expires": _acl_feeds_interval},
}

LOGGING: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
}
# The audit trail (quotas/observability/logs.py): one JSON line per refusal and per ban, on stderr beside the plain log.
LOGGING["formatters"]["json"] = {"()": "quotas.observability.logs.JsonFormatter"}
LOGGING["handlers"]["audit"] = {"class": "logging.StreamHandler", "formatter": "json"}
LOGGING["loggers"] = {"quotas.audit": {"handlers": ["audit"], "level": "INFO", "propagate": False}}
