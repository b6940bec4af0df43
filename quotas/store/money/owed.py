"""Budget spend Redis has not seen yet: kept in this process and charged by the poller once Redis answers.

Two kinds of spend reach a budget without Redis's knowledge:

* an actual cost whose settlement failed (Redis away after the view): the
  difference from the estimate the decision charged;
* what the local failure mode admitted during an outage (the estimate at the
  decision, then its reconciliation): Redis never decided those requests.

Both are kept here per client and budget period, as the spec the budget had
at the decision (its period's bounds) and a decision's time in that period,
and charged with the reconciliation script (``adjust.lua``): only into that
period, never into a later one. The local failure mode's usage is not charged
here: it is counted in the usage buffer (:mod:`quotas.store.usage_batches`),
which writes it once.

A failed settlement is kept apart, under its own id, with its usage: Redis
may have taken it and only the reply been lost, so its retry sends the same
settlement, budgets and usage together, which Redis takes at most once
(``adjust.lua``'s mark).

The ledger is bounded (``size`` entries): past that the oldest entry is
dropped and counted in ``quota_owed_spend_dropped_micros_total``, as is an
entry the script refuses (a client's keys in a bad state). A process that
exits while Redis is still away spools what it still owes
(:mod:`quotas.store.money.owed_spool`): the next process charges it, once.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from quotas import metrics
from quotas.rules.limits import Window


@dataclass(slots=True)
class Owed:
    """What client ``tag`` owes the budgets ``windows`` (their specs ``specs`` as at a decision at ``now``)."""

    tag: str
    windows: tuple[Window, ...]
    specs: tuple[bytes, ...]
    now: float
    micros: int
    settlement: str = ""  # a failed settlement's id: charged once, with its usage, never merged with another
    usage: str = ""  # the usage field prefix it is counted under with that settlement (else not counted here)
    #: With a settlement: the thresholds its decision reached and did not report, per budget (adjust.lua's own
    #: masks), which its charge reports: sent once, with the spend settled, whether Redis ran it or not.
    own: tuple[int, ...] = ()


class OwedSpend:
    """The ledger of budget spend this process owes Redis (see the module docstring)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: OrderedDict[tuple[str, tuple[bytes, ...], str], Owed] = OrderedDict()
        self._lock = threading.Lock()

    def __bool__(self) -> bool:
        return bool(self._entries)

    def owe(
        self,
        tag: str,
        windows: Sequence[Window],
        specs: Sequence[bytes],
        now: float,
        micros: int,
        *,
        settlement: str = "",
        usage: str = "",
        own: Sequence[int] = (),
    ) -> None:
        """Keep ``micros`` (may be negative: a cost below its estimate) owed to ``tag``'s budgets ``windows``,
        whose specs at the decision at ``now`` were ``specs``; with a ``settlement`` id, the failed settlement
        itself, usage (``usage``) included, kept apart from every other, with the thresholds its decision reached
        and did not report (``own``, see :class:`Owed`)."""
        if not micros or not (windows or (settlement and usage)):
            return
        key = (tag, tuple(specs), settlement)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self._entries[key] = Owed(
                    tag=tag,
                    windows=tuple(windows),
                    specs=tuple(specs),
                    now=now,
                    micros=micros,
                    settlement=settlement,
                    usage=usage,
                    own=tuple(own),
                )
            else:
                entry.micros += micros
            while len(self._entries) > self.size:
                _, dropped = self._entries.popitem(last=False)
                self.drop(dropped)

    def take(self) -> list[Owed]:
        """Every entry, removed from the ledger (give back those not charged with :meth:`keep`)."""
        with self._lock:
            entries = list(self._entries.values())
            self._entries.clear()
        return entries

    def keep(self, entries: Sequence[Owed]) -> None:
        """Owe ``entries`` again (their charge failed)."""
        for entry in entries:
            self.owe(
                entry.tag,
                entry.windows,
                entry.specs,
                entry.now,
                entry.micros,
                settlement=entry.settlement,
                usage=entry.usage,
                own=entry.own,
            )

    @staticmethod
    def drop(entry: Owed) -> None:
        """Count ``entry`` as spend Redis will never see."""
        if entry.micros > 0:
            metrics.owed_spend_dropped.inc(entry.micros)

    @property
    def total(self) -> int:
        """The micro-units owed, all clients together."""
        with self._lock:
            return sum(entry.micros for entry in self._entries.values())
