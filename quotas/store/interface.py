"""What the guard needs of a store: the seam between deciding (the guard) and keeping counters (a store).

:class:`~quotas.store.redis_store.RedisStore` is the one implementation: it encodes each operation for the
Lua library and sends it through a :class:`~quotas.contract.library.LibraryCaller`, which reaches Redis
(:class:`~quotas.store.transport.Transport`) or runs the same library in this process
(:class:`~quotas.store.backends.memory.MemoryTransport`). A store remembers nothing between calls and raises
:class:`~quotas.exceptions.StoreUnavailable` (or :class:`~quotas.exceptions.ScriptFailed`) when it fails;
the guard decides what a failure means.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from quotas.contract.keys import ClientKeys
from quotas.contract.reply_layout import AdjustedBudget
from quotas.rules.limits import Window
from quotas.store.decision import DecideCall, Decision, WindowState
from quotas.store.history_store import HistoryStore
from quotas.store.key_use_set import KeyUseSet
from quotas.store.primaries import Primaries
from quotas.store.published_multipliers import PublishedMultipliers
from quotas.store.redis_usage import UsageCounters
from quotas.store.refusal_lists import RefusalLists
from quotas.store.replies import Ban
from quotas.store.rules_version import RulesVersion
from quotas.store.server import Server


class Store(Protocol):
    """Every limit of a request decided at once, what follows a decision, and (through its parts) everything
    else the engine keeps in Redis. Nothing above the store holds a Redis client."""

    #: The key prefix of everything the store keeps.
    prefix: str
    #: The history of decisions, written from each process's notes.
    history: HistoryStore
    #: Each client's last refusals.
    refusals: RefusalLists
    #: When each API key was last used.
    key_use: KeyUseSet
    #: The adaptive multipliers the controller publishes.
    multipliers: PublishedMultipliers
    #: The rules version every process polls.
    rules_version: RulesVersion
    #: The usage counters: batches counted in a process, the spool, the flush's reads.
    usage: UsageCounters
    #: Operators' calls on the whole keyspace.
    server: Server
    #: Each server a decision may run on, for the doctor.
    primaries: Primaries

    def decide(self, call: DecideCall) -> Decision:
        """Check and consume every window of ``call`` at once, or none."""
        ...

    async def adecide(self, call: DecideCall) -> Decision:
        """:meth:`decide`, from asyncio."""
        ...

    def count(self, tag: str, usage: str, *, allowed: bool, weight: int | None, cost_micros: int) -> Decision:
        """Count a request decided without limits (an allow or deny list's entry) in ``tag``'s usage."""
        ...

    def refund(
        self,
        decision: Decision,
        states: Sequence[WindowState],
        times: int = 1,
        log_at_us: int | None = None,
        own: Sequence[int] = (),
    ) -> None:
        """Give back what ``decision`` consumed in ``states``' windows (``own``: per state, the alert thresholds
        it reached and has not reported, which a period quota takes back with the units)."""
        ...

    def adjust(
        self,
        decision: Decision,
        delta_micros: int,
        budgets: Sequence[bytes],
        *,
        in_usage: bool = True,
        own: Sequence[int] = (),
        settlement: str = "",
        release: int = 0,
    ) -> list[AdjustedBudget]:
        """Move ``decision``'s cost by ``delta_micros`` in the budgets whose specs are ``budgets`` (``own``: the
        alert thresholds it reached and has not reported, per budget), once per ``settlement`` id."""
        ...

    def release(self, decision: Decision) -> None:
        """End the concurrency leases ``decision`` holds."""
        ...

    def ping(self) -> bool:
        """Whether the store answers."""
        ...

    def keys_of(self, tag: str) -> ClientKeys:
        """Where client ``tag``'s state lives (for the guard, which counts usage in this process)."""
        ...

    def ban(self, tag: str) -> Ban | None:
        """``tag``'s ban in force now, or None."""
        ...

    def lift_ban(self, tag: str) -> bool:
        """End ``tag``'s ban (and its refusal count); True when there was one."""
        ...

    def clear(self, tag: str, windows: Sequence[Window] | None = None, keep: Sequence[Window] = ()) -> int:
        """Delete client ``tag``'s limit state (that of ``windows`` only, if given) but ``keep``'s; returns how
        many fields and keys went."""
        ...

    def close(self) -> None:
        """Drop the store's connections."""
        ...
