"""Section 13's trace count: the product modules, functions and calls one cold decision goes through.

``python -m bench.count_trace --redis-url URL [--warmup W]`` configures Django as
:mod:`bench.count_workload` does, sends W requests of new users through the
one-limit view (so every import, cache and connection is warm), then sends one
more for a new user under :func:`sys.setprofile`. From the moment
``QuotaThrottle.allow_request`` is entered until the middleware hands the
response back (headers set, the decision settled), every Python function call
whose code lives in one of the project's app packages (:data:`APPS`) is
counted: distinct files (modules), distinct functions and call events (a
generator's resume is a call too, as the profiler reports it). Comprehensions,
generator expressions and lambdas are left out: since Python 3.11 compiles them
as code objects of their own they would show up as calls, yet a reader sees
them as expressions of the function they are in. It prints one JSON line. It
runs without valgrind: what it counts does not depend on speed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from types import FrameType
from typing import Any

from django.conf import settings

from . import django_config

ROOT = Path(__file__).resolve().parent.parent
#: The project's app packages: a call into one of them is the product's work (Django, DRF and redis-py are not).
APPS = ("quotas", "plans", "usage", "adaptive", "dashboard", "notifications")
#: The function whose entry starts the count.
ENTRY = ("allow_request", str(ROOT / "quotas" / "drf" / "throttling.py"))


def is_product(filename: str) -> bool:
    """Whether ``filename`` is a module of one of :data:`APPS`."""
    return any(filename.startswith(str(ROOT / app) + "/") for app in APPS)


class Tracer:
    """A :func:`sys.setprofile` hook that counts product calls once :data:`ENTRY` was entered."""

    def __init__(self) -> None:
        self.started = False
        self.calls = 0
        self.functions: set[tuple[str, int, str]] = set()

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        code = frame.f_code
        if not self.started:
            if (code.co_name, code.co_filename) != ENTRY:
                return
            self.started = True
        if is_product(code.co_filename) and not code.co_name.startswith("<"):
            self.calls += 1
            self.functions.add((code.co_filename, code.co_firstlineno, code.co_name))

    def summary(self) -> dict[str, Any]:
        """The counts, and each module's functions (``path: [name:line, ...]``) to read where they go."""
        modules: dict[str, list[str]] = {}
        for filename, line, name in sorted(self.functions):
            modules.setdefault(str(Path(filename).relative_to(ROOT)), []).append(f"{name}:{line}")
        return {"modules": len(modules), "functions": len(self.functions), "calls": self.calls, "visited": modules}


def trace_one(warmup: int) -> dict[str, Any]:
    """Warm up with ``warmup`` new users, then count one more new user's decision (see the module docstring)."""
    from quotas.engine import default_engine
    from quotas.middleware import QuotaHeadersMiddleware

    from .views import BenchUser, OneLimitView, make_request

    view = QuotaHeadersMiddleware(OneLimitView.as_view())
    for pk in range(1, warmup + 1):
        view(make_request("/one/", BenchUser(pk=pk)))
    request = make_request("/one/", BenchUser(pk=warmup + 1))
    tracer = Tracer()
    sys.setprofile(tracer)
    try:
        status = view(request).status_code
    finally:
        sys.setprofile(None)
    default_engine.reset()
    if status != 200:
        raise RuntimeError(f"the traced request was answered {status}")
    return tracer.summary()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.count_trace", description=__doc__.splitlines()[0])
    parser.add_argument("--redis-url", required=True, help="a private redis-server (emptied first)")
    parser.add_argument("--warmup", type=int, default=200, help="W: new users' requests before the traced one")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    django_config.configure(args.redis_url)
    from .count_workload import COUNTED_QUOTAS

    settings.QUOTAS = {**settings.QUOTAS, **COUNTED_QUOTAS}
    import redis

    redis.Redis.from_url(args.redis_url).flushall()
    print(json.dumps(trace_one(args.warmup)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
