"""What a request served from a local allowance (:mod:`quotas.store.allowances`) is told: a
:class:`ServedDecision`, whose states are worked out from the allowance's grant only when read."""

from __future__ import annotations

from typing import Any

from quotas.rules.limits import Window
from quotas.store.decision import Decision, Reading, WindowState

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


#: The states a served decision is made with: none yet (see ServedDecision.states).
_NOT_MADE: list[WindowState] = []
#: Decision's own slot under its ``states`` field, which ServedDecision's property keeps the states in.
_STATES_SLOT: Any = Decision.__dict__["states"]


class ServedDecision(Decision):
    """A decision served from an allowance (made by :meth:`quotas.store.allowances.Allowance.serve` alone): the
    ``granted`` decision's fields, its states made on first read, from the allowance's ``basis`` with ``ahead``
    requests' units still in it and ``elapsed_us`` since the grant (:func:`served_states`).

    Most served requests read no state but through their headers, which read the same three
    (:meth:`readings`), and quotas.decide.hot_path's _conclude knows a served decision has nothing for it: the
    states are not made for them (figures in docs/benchmark-history.md)."""

    __slots__ = ("ahead", "basis", "elapsed_us")

    def __init__(self, granted: Decision, basis: Basis, ahead: int, elapsed_us: int, memo: dict[str, Any]) -> None:
        Decision.__init__(
            self,
            allowed=True,
            states=_NOT_MADE,
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

    def readings(self) -> list[Reading]:
        """Each window's numbers as :func:`served_states` works them out, without making the states."""
        basis, ahead, elapsed_us = self.basis, self.ahead, self.elapsed_us
        readings: list[Reading] = []
        for window, remaining, reset_us, _used, _alert, quota, units in basis:
            reset_us -= elapsed_us
            left = None if remaining is None else remaining + ahead * units
            readings.append((window, True, left, reset_us if reset_us > 0 else 0, 0, quota))
        return readings

    @property
    def states(self) -> list[WindowState]:
        """Each window's state as this request sees it (made on first read, then kept)."""
        try:
            states: list[WindowState] = _STATES_SLOT.__get__(self, ServedDecision)
        except AttributeError:  # not read yet
            states = served_states(self.basis, self.ahead, self.elapsed_us, False)
            _STATES_SLOT.__set__(self, states)
        return states

    @states.setter
    def states(self, states: list[WindowState]) -> None:
        if states is not _NOT_MADE:
            _STATES_SLOT.__set__(self, states)
