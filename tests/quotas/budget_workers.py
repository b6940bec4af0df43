"""Serving requests through the quota service in several threads of several processes, for the budget property.

A :class:`Server` is one "app server process": its own runtime (its own allowances), and lanes, each a thread
that checks a request (``quotas.decide.hot_path``) and later settles it (``settle``) as a request thread would.
The test process runs one itself; :class:`Workers` starts more in processes of their own (``spawn``: a fresh
interpreter, as a gunicorn worker is), each set up with the test's settings, its database and its Redis, and
serving the steps the test sends over a pipe. A step's operations run at once, each in its lane; the reply
comes when all of them are done, so the test knows which requests were in flight together.

Each kind of request is a small function (``KINDS``): what a view of that kind does between ``check`` and
``settle``. A check returns ``(admitted, from an allowance, estimate)``.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import threading
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager, suppress
from typing import Any

#: An operation: ("check", request id, API key, path, kind, actual cost), ("settle", request id, kind, actual
#: cost), ("tick",) (the poller's visit), ("reset",) or ("finish",) (see Server.run_one).
Op = tuple[Any, ...]
LANES = 10  # threads a process serves requests in: enough for every request a step keeps in flight (test module)


class Server:
    """One process's share of the traffic: lanes (threads) that run operations, and the requests in flight."""

    def __init__(self, lanes: int = LANES) -> None:
        self.verdicts: dict[int, Any] = {}  # request id -> its verdict, until settled
        self.signals = {80: 0, 100: 0}  # budget_threshold_crossed sent by this process, by threshold
        self._lock = threading.Lock()
        self._queues: list[queue.Queue] = []
        for _ in range(lanes):
            lane: queue.Queue = queue.Queue()
            threading.Thread(target=self._serve_lane, args=(lane,), daemon=True).start()
            self._queues.append(lane)
        from quotas.signals import budget_threshold_crossed

        budget_threshold_crossed.connect(self._heard, weak=False)

    def _heard(self, threshold: int, **kwargs: Any) -> None:
        with self._lock:
            self.signals[threshold] += 1

    def _serve_lane(self, lane: queue.Queue) -> None:
        from django.db import connections

        while True:
            op, future = lane.get()
            if op is None:
                connections.close_all()  # this thread's connections, before the process or the test ends
                future.set_result(None)
                return
            try:
                future.set_result(self.run_one(op))
            except BaseException as exc:  # reported to the test with the traceback
                future.set_exception(exc)

    def run(self, ops: list[tuple[int, Op]]) -> list[Any]:
        """Run ``(lane, op)`` pairs at once, each in its lane; their results, in order. Raises the first error,
        as a RuntimeError carrying every failed operation's traceback."""
        futures = []
        for lane, op in ops:
            future: Future = Future()
            self._queues[lane].put((op, future))
            futures.append(future)
        errors = [f.exception() for f in futures]
        if any(errors):
            text = "".join("".join(traceback.format_exception(e)) for e in errors if e is not None)
            raise RuntimeError(f"in process {os.getpid()}:\n{text}")
        return [f.result() for f in futures]

    def close(self) -> None:
        """Stop the lanes (each closes its database connections)."""
        futures = []
        for lane in self._queues:
            future: Future = Future()
            lane.put((None, future))
            futures.append(future)
        for future in futures:
            future.result(timeout=10)

    def run_one(self, op: Op) -> Any:
        """Run one operation in this thread (see ``Op``)."""
        from quotas.engine import default_engine

        name, *args = op
        if name == "check":
            rid, key, path, kind, actual = args
            return KINDS[kind][0](self, rid, key, path, actual)
        if name == "settle":
            rid, kind, actual = args
            verdict = self.verdicts.pop(rid)
            return KINDS[kind][1](verdict, actual)
        runtime = default_engine.runtime()
        if name == "tick":
            runtime.tick()  # the poller's visit: allowances that ended give back what they did not use, usage
            return None
        if name == "reset":  # between examples: nothing of the last one stays in this process
            self.verdicts.clear()
            runtime.settle_allowances(everything=True)
            runtime.store.usage.write(runtime.guard.usage_buffer)
            runtime.forget()  # refusals remembered, allowances
            with self._lock:
                self.signals = {80: 0, 100: 0}
            return None
        if name == "finish":  # at an example's end, as at a graceful shutdown; returns the signals sent here
            assert not self.verdicts, "every request is settled before the example ends"
            runtime.settle_allowances(everything=True)
            runtime.tick()
            assert runtime.store.usage.write(runtime.guard.usage_buffer)  # waits for a flush under way, if any
            with self._lock:
                return dict(self.signals)
        raise ValueError(f"unknown operation {name!r}")

    def checked(self, rid: int, verdict: Any) -> tuple[bool, bool, int]:
        """Keep an admitted ``verdict`` to settle later; what the test learns of it."""
        if verdict.allowed and verdict.decision is not None:
            self.verdicts[rid] = verdict
        return _seen(verdict)


def _facts(key: str, path: str) -> Any:
    from django.test import RequestFactory

    from quotas.decide import Facts

    http = RequestFactory().get(path, HTTP_X_API_KEY=key)
    return Facts(http, request=http)


# --- The kinds of request: how each is checked, and how it is settled after its view. ---


def check_plain(server: Server, rid: int, key: str, path: str, actual: int) -> tuple[bool, bool, int]:
    """A request priced by its plan's limits (no estimate of the view's own), settled later."""
    from quotas.decide import check
    from quotas.engine import default_engine

    return server.checked(rid, check(default_engine, _facts(key, path)))


def settle_reported(verdict: Any, actual: int) -> None:
    """The view answered 200 and reported ``actual`` (None: it reported nothing, the estimate stands)."""
    from quotas.decide import settle

    settle(verdict, 200, actual)


def settle_unreported(verdict: Any, actual: int) -> None:
    """The view answered 200 and reported no cost: the price stands (``actual`` is the estimate)."""
    from quotas.decide import settle

    settle(verdict, 200, None)


def settle_failed(verdict: Any, actual: int) -> None:
    """The view failed (500): its estimate is released, whatever it reported."""
    from quotas.decide import settle

    settle(verdict, 500, 123)


def check_rolled_back(server: Server, rid: int, key: str, path: str, actual: int) -> tuple[bool, bool, int]:
    """Issue 44, item 5: the request is checked inside the view's transaction (ATOMIC_REQUESTS, DRF's throttle
    runs in the view), which the failing view rolls back; then it is settled as a 500. Its alerts must outlive
    the rollback. Checked and settled in one operation: it is in flight only within its step."""
    from django.db import transaction

    from quotas.decide import check, settle
    from quotas.engine import default_engine

    with transaction.atomic():
        verdict = check(default_engine, _facts(key, path))
        seen = _seen(verdict)  # before settling: settling sets the decision's cost to the actual one
        transaction.set_rollback(True)
    settle(verdict, 500)
    return seen


def check_streamed(server: Server, rid: int, key: str, path: str, actual: int) -> tuple[bool, bool, int]:
    """Issue 44, item 6: a streaming view through the middleware, which reports its actual cost once its body is
    sent. Checked and settled in one operation."""
    return _stream(key, path, actual)


def check_streamed_priced(server: Server, rid: int, key: str, path: str, actual: int) -> tuple[bool, bool, int]:
    """A streaming view that reports no cost (its price stands). Checked and settled in one operation."""
    return _stream(key, path, None)


def _stream(key: str, path: str, actual: int | None) -> tuple[bool, bool, int]:
    """A streaming view behind the middleware that sets its actual cost (unless None) as its body ends; the body
    is read to its end and the response closed, as a WSGI server does."""
    from django.http import HttpResponse, StreamingHttpResponse

    from quotas.decide import check
    from quotas.engine import default_engine
    from quotas.formats.money import from_micros
    from quotas.http.context import add_verdict
    from quotas.http.middleware import QuotaHeadersMiddleware

    seen: list[tuple[bool, bool, int]] = []

    def view(request: Any) -> HttpResponse | StreamingHttpResponse:
        verdict = check(default_engine, _facts(key, path))
        verdict.request = request
        add_verdict(request, verdict)
        seen.append(_seen(verdict))  # before settling: settling sets the decision's cost to the actual one
        if not verdict.allowed:
            return HttpResponse(status=429)

        def body() -> Iterator[bytes]:
            yield b"first part"
            if actual is not None:
                request.quota_cost = from_micros(actual)  # known once the answer is generated

        return StreamingHttpResponse(body())

    request = _facts(key, path).http_request
    response = QuotaHeadersMiddleware(view)(request)
    assert isinstance(response, HttpResponse | StreamingHttpResponse)  # a sync view: no awaitable
    if isinstance(response, StreamingHttpResponse):
        for _ in response:  # the body to its end, as a WSGI server sends it
            pass
    response.close()
    return seen[0]


def _seen(verdict: Any) -> tuple[bool, bool, int]:
    decision = verdict.decision
    admitted = verdict.allowed and decision is not None
    return admitted, bool(admitted and decision.allowance), decision.cost_micros if decision else 0


def settle_nothing(verdict: Any, actual: int) -> None:
    """A kind checked and settled in one operation has nothing left to settle."""
    raise AssertionError("settled with its check")


#: kind -> (check, settle). "settle_error" is settled while Redis refuses every command (the test makes it so:
#: ``refusing_commands``); issue 44, item 7: the cost difference must not be lost.
KINDS: dict[str, tuple[Callable[..., tuple[bool, bool, int]], Callable[[Any, int], None]]] = {
    "equal": (check_plain, settle_unreported),
    "equal_reported": (check_plain, settle_reported),
    "below": (check_plain, settle_reported),
    "above": (check_plain, settle_reported),
    "error": (check_plain, settle_failed),
    "settle_error": (check_plain, settle_reported),
    "rollback": (check_rolled_back, settle_nothing),
    "stream": (check_streamed, settle_nothing),
    "stream_priced": (check_streamed_priced, settle_nothing),
}
#: Kinds whose request is checked and settled in one operation.
ONE_OPERATION = frozenset({"rollback", "stream", "stream_priced"})


@contextmanager
def refusing_commands(client: Any) -> Iterator[None]:
    """Redis refuses every command but ACL for the time of the block (NOPERM: a real Redis error at the
    client's next call, with no process killed and nothing faked)."""
    client.execute_command("ACL", "SETUSER", "default", "-@all", "+acl")
    try:
        yield
    finally:
        client.execute_command("ACL", "SETUSER", "default", "+@all")


# --- Worker processes ---


def _serve(conn: Any, quotas: dict[str, Any], database: str) -> None:
    """A worker process's main: set Django up as the test has it, then run the steps it is sent."""
    import django
    from django.conf import settings

    django.setup()
    settings.QUOTAS = quotas
    settings.DATABASES["default"]["NAME"] = database
    from django.db import connections

    connections["default"].settings_dict["NAME"] = database
    server = Server()
    try:
        while True:
            message = conn.recv()
            if message is None:
                break
            try:
                conn.send(("ok", server.run(message)))
            except BaseException:
                conn.send(("error", traceback.format_exc()))
    finally:
        server.close()
        from quotas.engine import default_engine

        default_engine.reset()  # gives back what allowances hold, writes usage counted here
        conn.close()


class Workers:
    """Server processes beside the test's own, serving one step at a time."""

    def __init__(self, count: int, quotas: dict[str, Any], database: str) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._pipes = []
        self._processes = []
        for _ in range(count):
            mine, theirs = ctx.Pipe()
            process = ctx.Process(target=_serve, args=(theirs, quotas, database), daemon=True)
            process.start()
            theirs.close()
            self._pipes.append(mine)
            self._processes.append(process)

    def send(self, index: int, ops: list[tuple[int, Op]]) -> None:
        """Start ``ops`` in worker ``index`` (see Server.run); :meth:`receive` gets their results."""
        self._pipes[index].send(ops)

    def receive(self, index: int, timeout: float = 60.0) -> list[Any]:
        """The results of what worker ``index`` was sent; its error, with its traceback, fails the test."""
        pipe = self._pipes[index]
        if not pipe.poll(timeout):
            raise AssertionError(f"worker {index} did not answer within {timeout} s")
        try:
            status, value = pipe.recv()
        except EOFError:
            raise AssertionError(f"worker {index} died (exit code {self._processes[index].exitcode})") from None
        if status != "ok":
            raise AssertionError(f"worker {index} failed:\n{value}")
        return value

    def stop(self) -> None:
        """Stop every worker (each settles and writes what it holds first); kill one that will not stop."""
        for pipe in self._pipes:
            with suppress(BrokenPipeError, OSError):  # one that died has told the test already
                pipe.send(None)
        for process in self._processes:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
                process.join(timeout=5)
        for pipe in self._pipes:
            pipe.close()
