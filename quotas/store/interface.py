"""What the guard needs of a store: the seam between deciding (the guard) and keeping counters (a store).

:class:`~quotas.store.redis_store.RedisStore` is the one implementation: it encodes each operation for the
Lua library and sends it through a :class:`~quotas.contract.library.LibraryCaller`, which reaches Redis
(:class:`~quotas.store.transport.Transport`) or runs the same library in this process
(:class:`~quotas.contract.memory.MemoryTransport`). A store remembers nothing between calls and raises
:class:`~quotas.exceptions.StoreUnavailable` (or :class:`~quotas.exceptions.ScriptFailed`) when it fails;
the guard decides what a failure means.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from quotas.contract.keys import ClientKeys
from quotas.contract.protocol import AdjustedBudget
from quotas.store.decision import DecideCall, Decision, WindowState


class Store(Protocol):
    """Every limit of a request decided at once, and what follows a decision."""

    @property
    def redis(self) -> Any:
        """The client whose data the store keeps (usage written in batches goes through it)."""
        ...

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
        self, decision: Decision, states: Sequence[WindowState], times: int = 1, log_at_us: int | None = None
    ) -> None:
        """Give back what ``decision`` consumed in ``states``' windows."""
        ...

    def adjust(
        self,
        decision: Decision,
        delta_micros: int,
        budgets: Sequence[bytes],
        *,
        in_usage: bool = True,
        own: Sequence[int] = (),
    ) -> list[AdjustedBudget]:
        """Move ``decision``'s cost by ``delta_micros`` in the budgets whose specs are ``budgets`` (``own``: the
        alert thresholds it reached and has not reported, per budget)."""
        ...

    def release(self, decision: Decision) -> None:
        """End the concurrency leases ``decision`` holds."""
        ...

    def ping(self) -> bool:
        """Whether the store answers."""
        ...

    def keys_of(self, tag: str) -> ClientKeys:
        """Where client ``tag``'s state lives."""
        ...
