"""The memory store's clients: redis-py's command methods and pipelines on a keyspace, its scripts, and the
transport the store calls the Lua library through; one keyspace per ``memory://`` name in this process."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

import redis
from redis.commands.core import CoreCommands
from redis.event import EventDispatcher
from redis.exceptions import ResponseError
from redis.lock import Lock

from quotas.contract.library import ENTRY_POINTS, script_source
from quotas.fork_safe import ForkSafeLock
from quotas.store.backends.memory.keyspace import Keyspace
from quotas.store.backends.memory.lua import ENCODER, LuaLibrary

_keyspaces: dict[str, tuple[Keyspace, LuaLibrary]] = {}
_registry_lock = ForkSafeLock()


def _name(url: str) -> str:
    parts = urlsplit(url)
    return (parts.netloc + parts.path).strip("/")


def _space(url: str) -> tuple[Keyspace, LuaLibrary]:
    name = _name(url)
    with _registry_lock:
        found = _keyspaces.get(name)
        if found is None:
            space = Keyspace()
            found = _keyspaces[name] = (space, LuaLibrary(space))
        return found


def keyspace(url: str = "memory://") -> Keyspace:
    """The keyspace a ``memory://`` URL names (made on first use): set its ``clock`` to move time in a test."""
    return _space(url)[0]


def forget(url: str = "memory://") -> None:
    """Drop the keyspace ``url`` names: the next client starts from nothing, on the real clock."""
    with _registry_lock:
        _keyspaces.pop(_name(url), None)


def _resp2_callbacks() -> dict[str, Any]:
    """redis-py's parsing of RESP2 replies, so this client answers in exactly the shapes redis.Redis does: a
    RESP2 client's public ``response_callbacks`` (by command name in capitals, as _Commands._run looks them
    up). Making the client opens no connection."""
    client = redis.Redis(protocol=2)
    try:
        return {str(name).upper(): parse for name, parse in client.response_callbacks.items()}
    finally:
        client.close()


_CALLBACKS = _resp2_callbacks()


def as_client_error(exc: ResponseError) -> ResponseError:
    """An error reply as redis-py raises it: the generic "ERR " code is dropped from the message."""
    message = str(exc)
    return ResponseError(message[4:]) if message.startswith("ERR ") else exc


class _Commands(CoreCommands):
    """redis-py's command methods, each ending in :meth:`execute_command` with the command's raw arguments."""

    # redis-py's command mixins expect one; nothing here connects, so no event is ever dispatched.
    _event_dispatcher = EventDispatcher()

    def __init__(self, space: Keyspace, library: LuaLibrary) -> None:
        self.keyspace, self.library = space, library
        self.response_callbacks = _CALLBACKS

    def _parse(self, name: str, reply: Any, options: dict[str, Any]) -> Any:
        options.pop("keys", None)
        callback = self.response_callbacks.get(name)
        return callback(reply, **options) if callback is not None else reply

    def _run(self, args: Sequence[Any], options: dict[str, Any]) -> Any:
        # redis-py names some commands in two words ("CONFIG RESETSTAT"): the first is the command.
        name = str(args[0]).upper()
        command, *words = name.split()
        try:
            reply = self.keyspace.command(command, [ENCODER.encode(a) for a in (*words, *args[1:])])
        except ResponseError as exc:
            raise as_client_error(exc) from None
        return self._parse(name, reply, options)

    def register_script(self, script: str | bytes) -> MemoryScript:  # type: ignore[override]
        """A callable running ``script`` in process, as redis-py's ``Script`` runs it on a server."""
        source = script.decode() if isinstance(script, bytes) else script
        return MemoryScript(self.library, source)


class MemoryRedis(_Commands):
    """A client of one in-process keyspace with redis-py's API (the subset of commands the product uses)."""

    def execute_command(self, *args: Any, **options: Any) -> Any:
        """Run one command now."""
        return self._run(args, options)

    def lock(self, name: str, timeout: float | None = None, **options: Any) -> MemoryLock:
        """redis-py's Lock on this keyspace (the adaptive controller takes one per run)."""
        return MemoryLock(self, name, timeout=timeout, **options)

    def get_encoder(self) -> Any:
        """How arguments become bytes: redis-py's encoder, as a real client has (a Lock encodes its token)."""
        return ENCODER

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> MemoryPipeline:
        """Commands queued, then run together under the keyspace's lock (a transaction either way)."""
        return MemoryPipeline(self.keyspace, self.library)

    def close(self) -> None:
        """Nothing to close: there is no connection."""

    def __repr__(self) -> str:
        return f"<MemoryRedis keyspace of {len(self.keyspace.data)} keys>"


class MemoryLock(Lock):
    """redis-py's Lock, its scripts registered on this client's keyspace.

    redis-py keeps a Lock's three scripts on the class, registered on the first client that makes one; each
    memory keyspace runs its own, so they are kept on each lock instead.
    """

    def register_scripts(self) -> None:
        self.lua_release = self.redis.register_script(self.LUA_RELEASE_SCRIPT)
        self.lua_extend = self.redis.register_script(self.LUA_EXTEND_SCRIPT)
        self.lua_reacquire = self.redis.register_script(self.LUA_REACQUIRE_SCRIPT)


class MemoryPipeline(_Commands):
    """redis-py's pipeline, for the memory client: :meth:`execute` runs the queue atomically."""

    def __init__(self, space: Keyspace, library: LuaLibrary) -> None:
        super().__init__(space, library)
        self._queue: list[tuple[Sequence[Any], dict[str, Any]]] = []

    def execute_command(self, *args: Any, **options: Any) -> MemoryPipeline:
        """Queue one command."""
        self._queue.append((args, options))
        return self

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        """Run the queued commands; a command's error is its result, raised after all ran (``raise_on_error``)."""
        queue, self._queue = self._queue, []
        results: list[Any] = []
        with self.keyspace.lock:
            for args, options in queue:
                try:
                    results.append(self._run(args, options))
                except ResponseError as exc:
                    results.append(exc)
        if raise_on_error:
            for result in results:
                if isinstance(result, ResponseError):
                    raise result
        return results

    def multi(self) -> None:
        """Commands after this run together, as all of them do here."""

    def __len__(self) -> int:
        return len(self._queue)

    def __enter__(self) -> MemoryPipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self._queue = []


class MemoryScript:
    """A script registered on the memory client: called like redis-py's ``Script``."""

    def __init__(self, library: LuaLibrary, source: str) -> None:
        self.library, self.source = library, source

    def __call__(self, keys: Sequence[Any] = (), args: Sequence[Any] = (), client: Any = None) -> Any:
        try:
            return self.library.run(self.source, keys, args)
        except ResponseError as exc:
            raise as_client_error(exc) from None


class MemoryTransport:
    """How the store calls the Lua library's entry points in memory: the EVAL form of each, run in process.

    It has :class:`~quotas.store.transport.Transport`'s interface; ``acall`` runs at once (nothing to wait
    for: no I/O, and a script holds the keyspace's lock for microseconds).
    """

    def __init__(self, client: MemoryRedis) -> None:
        self._client = client
        self._scripts = {name: client.register_script(script_source(name)) for name in ENTRY_POINTS}

    def call(self, entry: str, keys: Sequence[str], args: Sequence[object]) -> Any:
        """Run the library's ``entry`` with ``keys`` and ``args``."""
        return self._scripts[entry](keys, args)

    async def acall(self, entry: str, keys: Sequence[str], args: Sequence[object]) -> Any:
        """:meth:`call`, from asyncio."""
        return self.call(entry, keys, args)

    def script(self, entry: str) -> MemoryScript:
        """The script of entry point ``entry``."""
        return self._scripts[entry]

    def async_script(self, entry: str) -> None:
        """None: :meth:`acall` needs no asyncio client."""
        return None

    async def aclose(self) -> None:
        """Nothing to close."""

    def close(self) -> None:
        """Nothing to close."""


def memory_client(url: str) -> MemoryRedis:
    """A client of the keyspace ``url`` (``memory://[<name>]``) names."""
    return MemoryRedis(*_space(url))
