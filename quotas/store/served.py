"""What a request served from a local allowance (:mod:`quotas.store.allowances`) is told: a
:class:`ServedDecision`, whose states are worked out from the allowance's grant only when read."""

from __future__ import annotations

from typing import Any

from quotas.rules.limits import Window
from quotas.store.decision import Decision, Reading, WindowState
from quotas.store.replies import NOT_MADE, StatesOnRead

#: What an allowance keeps of each window's state at its grant: the window, its remaining, reset_us, used, alert
#: and quota, and the units one request takes from it (see quotas.store.allowances.Allowance._units).
Basis = list[tuple[Window, int | None, int, int, int, int, int]]


def served_states(basis: Basis, ahead: int, elapsed_us: int, alerts: bool) -> list[WindowState]:
    """The windows as one request from an allowance sees them: the grant's states (``basis``), with the units still
    ``ahead`` in the allowance counted as remaining (they are this client's), and ``elapsed_us`` since the grant
    gone by. ``alerts``: with the budget thresholds the grant newly reached (reported by the request that took
    it; the served ones report none). quotas.http.headers reads a served decision's remaining and reset alike."""
    states = []
    for window, remaining, reset_us, used, alert, quota, units in basis:
        extra = ahead * units
        reset_us -= elapsed_us
        used -= extra
        states.append(
            WindowState(
                window=window,
                ok=True,
                remaining=None if remaining is None else remaining + extra,
                # Conditional expressions rather than max(0, ...): max() parses its keywords on every call.
                reset_us=reset_us if reset_us > 0 else 0,
                retry_us=0,
                used=used if used > 0 else 0,
                alert=alert if alerts else 0,
                quota=quota,
            )
        )
    return states


class ServedDecision(StatesOnRead):
    """A decision served from an allowance (made by :meth:`quotas.store.allowances.Allowance.serve` alone): the
    ``granted`` decision's fields, its states made on first read, from the allowance's ``basis`` with ``ahead``
    requests' units still in it and ``elapsed_us`` since the grant (:func:`served_states`).

    Most served requests read no state but through their headers, which read the same three
    (:meth:`readings`), and the service's :meth:`notes`, which a served decision has none of: the states are
    not made for them (figures in docs/benchmark-history.md)."""

    __slots__ = ("ahead", "basis", "elapsed_us")

    def __init__(self, granted: Decision, basis: Basis, ahead: int, elapsed_us: int, memo: dict[str, Any]) -> None:
        Decision.__init__(
            self,
            allowed=True,
            states=NOT_MADE,
            now=granted.now,  # the grant's time: a refund or a cost's adjustment finds the same windows and periods
            weight=granted.weight,
            tag=granted.tag,
            cost_micros=granted.cost_micros,
            usage=granted.usage,
            specs=granted.specs,
            multiplier=granted.multiplier,
            allowance=True,
            memo=memo,
        )  # no concurrency lease (request_id): an allowance never holds one (see eligible)
        self.basis = basis
        self.ahead = ahead
        self.elapsed_us = elapsed_us

    def made_states(self) -> list[WindowState]:
        """Each window's state as this request sees it (:func:`served_states`)."""
        return served_states(self.basis, self.ahead, self.elapsed_us, False)

    def readings(self) -> list[Reading]:
        """Each window's numbers as :func:`served_states` works them out, without making the states."""
        if self._states is not None:
            return Decision.readings(self)
        basis, ahead, elapsed_us = self.basis, self.ahead, self.elapsed_us
        readings: list[Reading] = []
        for window, remaining, reset_us, _used, _alert, quota, units in basis:
            reset_us -= elapsed_us
            left = None if remaining is None else remaining + ahead * units
            readings.append((window, True, left, reset_us if reset_us > 0 else 0, 0, quota))
        return readings

    def notes(self) -> tuple[int, bool, list[WindowState]]:
        """None of them: no shadow or shaping window is served from an allowance (see
        :func:`quotas.store.allowances.eligible`), and a served request reports no budget alert."""
        return 0, False, []
