"""The per-process caches of API keys and users: shared by a process's threads, emptied by every reload."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator

import pytest

from quotas.rules.snapshot import RuleSet, Subscriber
from quotas.runtime.rules_cache import RulesCache
from quotas.store.rules_version import RulesVersion


class DictBackend:
    """A rules backend holding its keys in a dict (the RulesBackend protocol; the DB one is tested elsewhere).

    ``during_lookup`` runs inside a key lookup, between reading and answering:
    where another thread's reload can fall.
    """

    def __init__(self) -> None:
        self.keys: dict[str, Subscriber] = {}
        self.queries = 0
        self.during_lookup = lambda: None

    def load(self) -> RuleSet:
        return RuleSet((), None)

    def subscriber_for_key(self, key_hash: str) -> Subscriber | None:
        self.queries += 1
        found = self.keys.get(key_hash)
        self.during_lookup()
        return found

    def subscriber_for_user(self, user_id: object) -> Subscriber | None:
        return None


@pytest.fixture
def backend() -> DictBackend:
    return DictBackend()


@pytest.fixture
def cache(backend: DictBackend, redis_client) -> RulesCache:
    rules = RulesCache(backend, RulesVersion(redis_client, "quota:v1"), interval=0, cache_size=4)
    rules.current()
    return rules


@pytest.fixture
def fast_thread_switches() -> Iterator[None]:
    """Switch threads every microsecond, so that races between two dict operations actually happen."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


@pytest.mark.slow
def test_threads_share_the_key_cache_while_it_evicts_and_reloads(backend, redis_client, fast_thread_switches):
    """Lookups never fail because another thread evicted or cleared the entry they were reading.

    A race, so it is given time: before the fix a KeyError came within about a second.
    """
    for i in range(3):
        backend.keys[f"k{i}"] = Subscriber(id=i, plan_id=1)
    # Three keys in turn over two places: constant eviction.
    cache = RulesCache(backend, RulesVersion(redis_client, "quota:v1"), interval=0, cache_size=2)
    cache.current()
    errors: list[BaseException] = []
    stop = threading.Event()

    def look_up(offset: int) -> None:
        n = offset
        try:
            while not stop.is_set():
                n += 1
                assert cache.subscriber_for_key(f"k{n % 3}").id == n % 3
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    def reload() -> None:
        while not stop.is_set():
            cache.reload()

    threads = [threading.Thread(target=look_up, args=(i,)) for i in range(6)] + [threading.Thread(target=reload)]
    for t in threads:
        t.start()
    stop.wait(2.0)
    stop.set()
    for t in threads:
        t.join(10)
    assert errors == []


def test_a_lookup_overtaken_by_a_reload_does_not_cache_what_it_read(cache, backend):
    """A key issued (and the rules reloaded) while its lookup was reading works at the next request."""
    new = Subscriber(id=7, plan_id=1)

    def issued_meanwhile() -> None:
        backend.keys["fresh"] = new
        backend.during_lookup = lambda: None
        cache.reload()  # what the version bump of the new key does

    backend.during_lookup = issued_meanwhile
    assert cache.subscriber_for_key("fresh") is None  # read before the key existed
    assert cache.subscriber_for_key("fresh") is new  # not remembered as unknown
    assert backend.queries == 2


def test_unknown_keys_are_remembered_apart_from_known_ones(cache, backend):
    """A stream of unknown keys costs one lookup each and leaves the known keys cached."""
    backend.keys["known"] = Subscriber(id=1, plan_id=1)
    assert cache.subscriber_for_key("known") is not None
    for i in range(50):
        assert cache.subscriber_for_key(f"guess-{i}") is None
    queries = backend.queries
    assert cache.subscriber_for_key("known") is not None
    assert cache.subscriber_for_key("guess-49") is None
    assert backend.queries == queries
