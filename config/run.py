"""``python -m config.run``: the whole platform in the foreground, supervised by honcho (``make run``).

It starts the Procfile's processes: gunicorn (``web``), two Celery workers (``worker`` for the periodic tasks,
``notifier`` for the webhook dispatcher on its own queue) and beat. Redis is ``REDIS_URL`` when set. Otherwise
a real redis-server is embedded: a free loopback port, AOF under
``run/redis/``, and it is one of the Procfile's processes, so the Ctrl-C that stops gunicorn and Celery stops
it too. After printing the URLs and demo keys this process runs honcho and waits: Ctrl-C reaches honcho
directly (the terminal signals the whole foreground group), honcho stops every child's process group, and this
process then exits 0, so ``make run`` ends quietly instead of reporting honcho's 130 as an error.

Environment: ``PORT`` (default 8000), ``REDIS_URL`` (default: embedded), ``RUN_DIR`` (default ``run/``; the
end-to-end test points it elsewhere so it never shares the developer's Redis data or beat schedule),
``PROMETHEUS_MULTIPROC_DIR`` (default: ``$RUN_DIR/prometheus``, emptied at start). It sets
``SECURE_SSL_REDIRECT``, ``SESSION_COOKIE_SECURE`` and ``CSRF_COOKIE_SECURE`` off: the demo is plain HTTP.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import django

from config.embedded_redis import free_port, redis_server_binary
from config.secret_key import ensure_key, run_dir

BASE_DIR = Path(__file__).resolve().parent.parent
DEFAULT_PORT = 8000
#: gunicorn serves plain HTTP on 127.0.0.1 here, so the HTTPS settings a deployment gets by default with DEBUG off
#: (config/settings.py) are off: no redirect to an https:// nobody serves, cookies that plain HTTP may carry.
PLAIN_HTTP = {"SECURE_SSL_REDIRECT": "false", "SESSION_COOKIE_SECURE": "false", "CSRF_COOKIE_SECURE": "false"}


def port_is_free(port: int) -> bool:
    """Whether gunicorn will be able to bind 127.0.0.1:port (failing here beats a half-started honcho)."""
    with socket.socket() as sock:
        # Same option as gunicorn, so a port lingering in TIME_WAIT still counts as free.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def redis_env(run_dir: Path) -> dict[str, str]:
    """REDIS_URL for every process, plus what the Procfile's ``redis`` line needs when Redis is embedded."""
    if url := os.environ.get("REDIS_URL"):
        return {"REDIS_URL": url}
    port = free_port()
    (run_dir / "redis").mkdir(parents=True, exist_ok=True)
    return {
        "REDIS_URL": f"redis://127.0.0.1:{port}/0",
        "REDIS_SERVER": redis_server_binary(),
        "REDIS_PORT": str(port),
    }


def banner(port: int, redis_url: str, embedded: bool) -> str:
    """What to open and curl. The demo keys derive from SECRET_KEY, so printing them reads no database."""
    from demo.seed import demo_key, demo_plans

    base = f"http://127.0.0.1:{port}"
    # The free plan's first rate per limit, read from the seed data so the banner says what the headers will.
    plans = demo_plans().plans
    (free_plan,) = (plan for plan in plans if plan.key == "free")
    free = {limit.key: limit.values["rates"].split(";")[0].strip() for limit in free_plan.children["limits"]}
    lines = [
        f"Quota platform on {base}  (Redis {redis_url}, {'embedded' if embedded else 'from REDIS_URL'})",
        f"  API     {base}/api/demo/ping",
        f"  Admin   {base}/admin/   (create a login with: manage.py createsuperuser)",
        f"  Health  {base}/healthz",
        f"  Schema  {base}/api/schema/",
        "",
        "Demo API keys, one per plan:",
    ]
    for plan in plans:
        lines.append(f'  curl -H "X-API-Key: {demo_key(plan.key)}" {base}/api/demo/ping   # {plan.key}')
    lines += [
        "",
        f"A burst past the free plan's limits ({free['global']} overall, {free['search']} on search) gets 429 with "
        "Retry-After:",
        f"  for i in $(seq 12); do curl -si -H \"X-API-Key: {demo_key('free')}\" '{base}/api/demo/search?q=x'"
        " | grep -iE '^(HTTP|retry-after)'; done",
        "",
        "Ctrl-C stops everything.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    port = int(os.environ.get("PORT", DEFAULT_PORT))
    if not port_is_free(port):
        sys.exit(f"Port {port} is already in use on 127.0.0.1; choose another with PORT=...")

    run_path = run_dir()
    run_path.mkdir(parents=True, exist_ok=True)
    if not os.environ.get("SECRET_KEY"):
        ensure_key(run_path)  # generated once; every later command in this checkout reads the same file
    redis = redis_env(run_path)
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        # gunicorn's workers and Celery's processes keep their metrics here, for /metrics to sum
        # (quotas/metrics.py).
        # A new run starts from zero; a directory given in the environment is left as it is.
        metrics_dir = run_path / "prometheus"
        shutil.rmtree(metrics_dir, ignore_errors=True)
        metrics_dir.mkdir()
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(metrics_dir)
    os.environ.update(
        redis,
        PORT=str(port),
        RUN_DIR=str(run_path),
        # `make run` does not activate the venv; the Procfile's gunicorn and celery must still be ours.
        PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        PYTHONUNBUFFERED="1",  # log lines reach honcho's pipes as they happen
        **PLAIN_HTTP,
    )
    django.setup()
    from django.conf import settings

    # WhiteNoise warns at every worker boot when STATIC_ROOT is missing; the finders serve the files anyway.
    Path(settings.STATIC_ROOT).mkdir(parents=True, exist_ok=True)
    embedded = "REDIS_SERVER" in redis
    print(banner(port, redis["REDIS_URL"], embedded), flush=True)

    # honcho gives each process type PORT = base + 100 * position, so "web" goes first to get PORT itself.
    names = ["web", "worker", "notifier", "beat", *(["redis"] if embedded else [])]
    argv = [
        sys.executable, "-m", "honcho", "start",
        "--procfile", str(BASE_DIR / "Procfile"),
        "--app-root", str(BASE_DIR),
        "--env", os.devnull,  # the environment is decided above; a stray .env must not override REDIS_URL
        "--port", str(port),
        *names,
    ]  # fmt: skip
    os.chdir(BASE_DIR)  # gunicorn and celery import `config` from the working directory
    sys.exit(supervise(argv))


def supervise(argv: list[str]) -> int:
    """Run honcho (``argv``) to its end; the exit status for ``make``: 0 when Ctrl-C stopped it.

    The terminal sends Ctrl-C's SIGINT to honcho as well as to this process; here it only marks the run as
    interrupted (no KeyboardInterrupt while honcho stops the others). honcho answers it with 130, which make
    would print as "Error 130"; a stop the user asked for is a success.
    """
    interrupted = False

    def note_interrupt(signum: int, frame: object) -> None:
        nonlocal interrupted
        interrupted = True

    # A handler, not SIG_IGN: exec resets handlers to the default, so honcho still gets Ctrl-C.
    signal.signal(signal.SIGINT, note_interrupt)
    code = subprocess.call(argv)
    if interrupted and code in (0, 130, -signal.SIGINT):
        return 0
    return code


if __name__ == "__main__":
    main()
