"""The memory store beside a real Redis 7: the same commands and the same scripts give the same answers.

The behaviour suite (tests/quotas/behaviour) holds the engine to the same results on every store; here the
memory store's own parts are compared with redis-server directly: its keyspace's commands through redis-py's
methods, Lua's values crossing to Python and back, and what the URL, the checks and the doctor say of it.
"""

from __future__ import annotations

import re
import threading

import pytest
from django.core import checks, mail
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.test import Client

from quotas.engine import default_engine
from quotas.formats.store_urls import describe, parse_url
from quotas.middleware import QuotaHeadersMiddleware
from quotas.store.backends import memory
from quotas.store.backends.connect import connect
from quotas.store.backends.memory import MemoryRedis, forget, keyspace, memory_client
from quotas.store.backends.memory.base import SWEEP_EVERY
from quotas.store.opening import MEMORY_STORE_REFUSED
from tests.conftest import TEST_STORE_URL
from tests.factories import EndpointLimitFactory, PlanFactory

URL = "memory://compare"


@pytest.fixture
def mem():
    forget(URL)
    yield memory_client(URL)
    forget(URL)


def both(redis_client, mem, call):
    """``call`` on the session's Redis 7 and on the memory store: (Redis's answer, the memory store's)."""
    answers = []
    for client in (redis_client, mem):
        try:
            answers.append(call(client))
        except Exception as exc:  # an error is an answer too: its type and message are compared
            answers.append((type(exc).__name__, str(exc).split(",")[0]))
    return tuple(answers)


COMMANDS = {
    "strings": lambda c: [c.set("s", "v"), c.get("s"), c.set("s", "w", nx=True), c.set("n", 5, px=60_000),
                          c.incr("n"), c.mget("s", "n", "missing"), c.set("s", "x", get=True), c.exists("s", "n", "z"),
                          c.delete("s", "missing"), c.type("n"), c.ttl("n"), 0 < c.pttl("n") <= 60_000],
    "hashes": lambda c: [c.hset("h", mapping={"a": 1, "b": "x"}), c.hincrby("h", "a", 41), c.hget("h", "a"),
                         c.hmget("h", "a", "zz", "b"), c.hgetall("h"), c.hlen("h"), c.hdel("h", "a", "zz"),
                         sorted(c.hscan("h", 0, match="b*")[1].items()), c.hincrby("h", "b", 1)],
    "sorted sets": lambda c: [c.zadd("z", {"a": 3, "b": 1, "c": 2}), c.zadd("z", {"a": 0}, nx=True),
                              c.zadd("z", {"b": 0.5}, gt=True), c.zadd("z", {"b": 5}, gt=True),
                              c.zrange("z", 0, -1, withscores=True), c.zrange("z", 0, 1, desc=True),
                              c.zrangebyscore("z", "(2", "+inf"), c.zrangebyscore("z", "-inf", 5, start=1, num=1),
                              c.zincrby("z", 2.5, "c"), c.zscore("z", "c"), c.zremrangebyrank("z", 0, 0),
                              c.zremrangebyscore("z", "-inf", "(5"), c.zcard("z"), c.zrem("z", "b", "q"),
                              c.exists("z")],
    "lists": lambda c: [c.lpush("l", "a", "b", "c"), c.rpush("l", "d"), c.lrange("l", 0, -1), c.ltrim("l", 0, 1),
                        c.lrange("l", -5, 10), c.llen("l")],
    "expiry": lambda c: [c.set("e", 1), c.expire("e", 100), 0 < c.pttl("e") <= 100_000, c.persist("e"),
                         c.pttl("e"), c.pttl("missing"), c.pexpire("e", 0), c.get("e")],
    "scan": lambda c: [c.mset({"p:{a}:u:1": 1, "p:{b}:u:2": 2, "p:x": 3, "p*y": 4}),
                       sorted(c.scan_iter(match="p:{*}:u:*")), sorted(c.scan_iter(match="p\\*y")),
                       sorted(c.keys("p?x"))],
    "wrong type": lambda c: [c.set("t", 1), c.hget("t", "f")],
    "pipeline": lambda c: (lambda p: [p.set("q", 1), p.incr("q"), p.get("q"), p.execute()])(
        c.pipeline(transaction=False)
    )[-1],
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_command_answers_as_redis_7_does(redis_client, mem, name):
    """redis-py's methods on the memory store return what they return on redis-server, errors included."""
    redis_answer, memory_answer = both(redis_client, mem, COMMANDS[name])
    assert memory_answer == redis_answer


SCRIPTS = [
    ("numbers are truncated and false is nil", "return {1, 2.9, -2.9, false, 'x'}", [], []),
    ("an array ends at its first nil", "return {1, 2, nil, 4}", [], []),
    ("true is 1, a string stays bytes", "return {true, 'a\\0b'}", [], []),
    ("status and error replies", "return redis.status_reply('FINE')", [], []),
    ("an error table raises", "return redis.error_reply('ERR no good')", [], []),
    ("keys and args arrive as strings", "return {KEYS[1], ARGV[1], ARGV[2], #ARGV}", ["k"], [7, 1.5]),
    ("redis.call's replies in Lua", "redis.call('HSET', KEYS[1], 'f', 1.5) "
     "return {redis.call('HGET', KEYS[1], 'f'), redis.call('HGET', KEYS[1], 'nope') == false, "
     "type(redis.call('SET', KEYS[1] .. 'x', 'v')), redis.call('TYPE', KEYS[1]).ok}", ["h"], []),
    ("a failing command inside a script", "redis.call('SET', KEYS[1], 'v') return redis.call('HGET', KEYS[1], 'f')",
     ["s"], []),
    ("pcall returns the error as a table", "redis.call('SET', KEYS[1], 'v') "
     "local r = redis.pcall('HGET', KEYS[1], 'f') return type(r.err)", ["s"], []),
    ("struct packs and unpacks the library's formats",
     "local raw = struct.pack('<d', 2.5) local v, nxt = struct.unpack('<d', raw) return {#raw, v * 2, nxt}", [], []),
]  # fmt: skip


@pytest.mark.parametrize(("source", "keys", "args"), [s[1:] for s in SCRIPTS], ids=[s[0] for s in SCRIPTS])
def test_a_scripts_reply_crosses_to_python_as_from_redis_7(redis_client, mem, source, keys, args):
    """Lua values become the same replies, and redis.call's replies the same Lua values, as on redis-server."""
    redis_answer, memory_answer = both(redis_client, mem, lambda c: c.register_script(source)(keys=keys, args=args))
    assert memory_answer == redis_answer


def test_the_url_names_the_store_and_says_what_is_wrong():
    """memory:// and memory://<name> are store URLs; anything more is refused with a message naming the form."""
    assert parse_url("memory://").topology == "memory"
    assert describe("memory://tests") == "memory (this process only)"
    assert isinstance(connect("memory://tests", 1.0), MemoryRedis)
    for bad in ("memory://user:secret@tests", "memory://tests?x=1", "memory://host:6379"):
        with pytest.raises(ValueError, match=r"memory:// or memory://<name>"):
            parse_url(bad)


def test_two_names_are_two_keyspaces_and_forget_empties_one():
    first, second = memory_client("memory://one"), memory_client("memory://two")
    first.set("k", 1)
    assert memory_client("memory://one").get("k") == b"1"
    assert second.get("k") is None
    forget("memory://one")
    assert memory_client("memory://one").get("k") is None


def test_without_lupa_the_system_check_says_what_to_install(set_quotas, monkeypatch):
    """quotas.E058 when REDIS_URL is memory:// and lupa is missing; nothing when lupa is there."""
    set_quotas(REDIS_URL="memory://")
    ids = lambda: {m.id for m in checks.run_checks()}  # noqa: E731
    assert "quotas.E058" not in ids()
    monkeypatch.setattr(memory.lua, "lua51", None)
    assert "quotas.E058" in ids()


def test_outside_tests_and_debug_the_memory_store_is_a_start_up_error(set_quotas, settings, monkeypatch):
    """quotas.E091 with DEBUG off outside a test environment; DEBUG, a test run, or the setting lift it."""
    set_quotas(REDIS_URL="memory://")
    ids = lambda: {m.id for m in checks.run_checks()}  # noqa: E731
    assert "quotas.E091" not in ids()  # this is a test run (Django's test environment gives mail an outbox)
    monkeypatch.delattr(mail, "outbox")
    settings.DEBUG = False
    assert "quotas.E091" in ids()
    settings.DEBUG = True
    assert "quotas.E091" not in ids()
    settings.DEBUG = False
    set_quotas(ALLOW_MEMORY_STORE_IN_PRODUCTION=True)
    assert "quotas.E091" not in ids()
    set_quotas(ALLOW_MEMORY_STORE_IN_PRODUCTION="yes")
    assert "quotas.E090" in ids()


def test_outside_tests_and_debug_the_store_and_the_middleware_refuse_the_memory_store(
    set_quotas, settings, monkeypatch
):
    """E091's condition also stops a process that runs no checks: the quota middleware (built as a server loads
    the application) and the opening of the store raise ImproperlyConfigured with one line; the setting lifts it."""
    set_quotas(REDIS_URL="memory://")
    monkeypatch.delattr(mail, "outbox")
    settings.DEBUG = False
    with pytest.raises(ImproperlyConfigured, match=re.escape(MEMORY_STORE_REFUSED)):
        QuotaHeadersMiddleware(lambda request: None)
    with pytest.raises(ImproperlyConfigured, match=re.escape(MEMORY_STORE_REFUSED)):
        default_engine.runtime()
    assert "\n" not in MEMORY_STORE_REFUSED
    set_quotas(ALLOW_MEMORY_STORE_IN_PRODUCTION=True)
    QuotaHeadersMiddleware(lambda request: None)
    assert default_engine.runtime().store is not None


def test_check_deploy_warns_that_the_memory_store_counts_per_process(set_quotas):
    set_quotas(REDIS_URL="memory://")
    assert "quotas.W006" in {m.id for m in checks.run_checks(include_deployment_checks=True)}
    assert "quotas.W006" not in {m.id for m in checks.run_checks()}


@pytest.mark.django_db
def test_the_doctor_says_the_memory_store_is_for_tests(set_quotas, capsys):
    set_quotas(REDIS_URL="memory://")
    call_command("quota_doctor", "--json")
    out = capsys.readouterr().out
    assert "memory (this process only)" in out
    assert '"warning"' in out


@pytest.fixture
def one_off_store(db, quota_clock):
    """The tests' memory store with a default plan of 100/min for anonymous clients, and its clock."""
    plan = PlanFactory(slug="free", is_default=True)
    EndpointLimitFactory(plan=plan, name="global", rates="100/min", algorithm="fixed_window")
    return quota_clock


def entries(space) -> int:
    """What a keyspace holds: a string counts one, a hash, sorted set or list its fields, members or items.

    Read under the keyspace's lock, as every command and script runs: the runtime's poller thread writes to it
    meanwhile, and a script read half done shows keys Redis would never show (see the test after the sweep's)."""
    with space.lock:
        return sum(len(value) if isinstance(value, dict | list) or hasattr(value, "scores") else 1
                   for value in space.data.values())  # fmt: skip


def mentions(space, text: bytes) -> bool:
    """Whether a key, or a field, member or item of one, in ``space`` holds ``text`` (read under the keyspace's
    lock: see :func:`entries`)."""
    with space.lock:
        for key, value in space.data.items():
            parts = value if isinstance(value, dict | list) else getattr(value, "scores", ())
            if text in key or any(isinstance(part, bytes) and text in part for part in parts):
                return True
        return False


@pytest.mark.slow  # 6,000 clients' requests: seconds of work
@pytest.mark.django_db
@pytest.mark.urls("tests.urls")
def test_one_off_clients_entries_are_swept_once_their_windows_pass(one_off_store):
    """2,000 clients that each send one request and never return leave over 6,000 entries (more keys with an expiry
    than SWEEP_EVERY, so a sweep waits for as many commands as there are such keys); ten days later (every window
    and usage day passed) they are gone though nothing reads them again: 200 later clients' requests leave only
    their own. (6,000 clients, as this test had before, cost 6 s of CPU and tested nothing more.)"""
    client = Client()
    for i in range(2000):
        address = f"2001:db8:{i // 256:x}:{i % 256:x}::1"  # one /64 each: one client each
        assert client.get("/api/demo/ping", REMOTE_ADDR=address).status_code == 200
    space = keyspace(TEST_STORE_URL)
    assert entries(space) > 6_000
    assert len(space.expires) > SWEEP_EVERY
    one_off = b"ip.~"  # how an IPv6 client's id is written (hashed), where the later clients' are IPv4
    assert mentions(space, one_off)
    one_off_store.advance(10 * 86_400)
    for i in range(SWEEP_EVERY + 10):
        assert client.get("/api/demo/ping", REMOTE_ADDR=f"198.51.100.{i % 200}").status_code == 200
    # Every one-off client's counters and usage are gone. (What is left is the later clients' own: 1,100 to 1,900
    # entries, with how many usage fields are not yet flushed.)
    assert not mentions(space, one_off)


@pytest.mark.django_db
@pytest.mark.urls("tests.urls")
def test_what_the_sweep_test_reads_of_the_keyspace_is_never_a_background_write_half_done(one_off_store, set_quotas):
    """The sweep test above failed once in a full run: an IPv6 one-off client was "still mentioned" after the jump.
    What it saw was the poller's first write after the jump, caught half done: the history notes of the requests
    before the jump go into their hour's top-clients set (ZINCRBY, creating the set), whose EXPIREAT, ten days
    past, then deletes it, all in one script under the keyspace's lock, as Redis runs a script whole. The test read
    ``space.data`` without that lock, between the two. Forced here: the poller's work run on a thread of the test's
    own (no poller thread: RULES_CHECK_INTERVAL 0), held by the keyspace's clock at the moment that set holds the
    one-off clients; what mentions() reads once it is let go is the script's end, never its middle."""
    set_quotas(RULES_CHECK_INTERVAL=0)
    client = Client()
    for i in range(5):
        assert client.get("/api/demo/ping", REMOTE_ADDR=f"2001:db8:0:{i:x}::1").status_code == 200
    runtime = default_engine.runtime()
    assert runtime.history.pending()  # the notes the poller would write at its next tick
    space = keyspace(TEST_STORE_URL)
    one_off_store.advance(10 * 86_400)
    space.sweep()
    assert not mentions(space, b"ip.~")  # every counter and usage of theirs went with the sweep

    writer, held, go_on = None, threading.Event(), threading.Event()

    def clock() -> float:
        # Read inside every command that looks at expiry; on the writer's thread that command holds the lock.
        if threading.current_thread() is writer and not held.is_set() and mentions(space, b"ip.~"):
            held.set()
            go_on.wait()
        return one_off_store.now()

    space.clock = clock
    writer = threading.Thread(target=runtime.tick)
    writer.start()
    try:
        assert held.wait(timeout=30)  # the tick's history write, inside its script, holds the one-off clients
        go_on.set()
        assert not mentions(space, b"ip.~")
    finally:
        go_on.set()
        writer.join()
    assert not mentions(space, b"ip.~")
