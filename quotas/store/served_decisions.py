"""A decision served from a local allowance (:mod:`quotas.store.allowances`): the grant's fields, and its windows'
states as that one request sees them, made only when something reads them.

Kept apart from the allowances that serve them: this is what a served request carries up to the headers
(:mod:`quotas.http.headers` reads the same three numbers), the allowances are the bookkeeping of what was granted.
"""

from __future__ import annotations

from typing import Any

from quotas.rules.limits import Window
from quotas.store.decision import Decision, WindowState

#: What an allowance keeps of each window's state at its grant: the window, its remaining, reset_us, used, alert
#: and quota, and the units one request takes from it (see Allowance._units).
Basis = list[tuple[Window, int | None, int, int, int, int, int]]


def served_states(basis: Basis, ahead: int, elapsed_us: int, alerts: bool) -> list[WindowState]:
    """The windows as one request from an allowance sees them: the grant's states (``basis``), with the units still
    ``ahead`` in the allowance counted as remaining (they are this client's), and ``elapsed_us`` since the grant
    gone by. ``alerts``: with the budget thresholds the grant newly reached (reported by the request that took
    it; the served ones report none). quotas.http.headers reads a served decision's remaining and reset alike."""
    states = []
    # Each state made by object.__new__ and its slots set here, rather than by WindowState(...): its class call
    # and __init__'s frame cost about 22,000 instructions with five windows, this 16,500 (cachegrind, states
    # alone). Every field is set, in WindowState's order; quota is the grant's (never 0).
    new = object.__new__
    for window, remaining, reset_us, used, alert, quota, units in basis:
        extra = ahead * units
        reset_us -= elapsed_us
        used -= extra
        state = new(WindowState)
        state.window = window
        state.ok = True
        state.remaining = None if remaining is None else remaining + extra
        # Conditional expressions rather than max(0, ...): max() parses its keywords on every call (about 1,000
        # instructions each, cachegrind).
        state.reset_us = reset_us if reset_us > 0 else 0
        state.retry_us = 0
        state.delay_us = 0
        state.used = used if used > 0 else 0
        state.alert = alert if alerts else 0
        state.quota = quota
        states.append(state)
    return states


#: Decision's own slot under its ``states`` field, which ServedDecision's property keeps the states in.
_STATES_SLOT: Any = Decision.__dict__["states"]


class ServedDecision(Decision):
    """A decision served from an allowance (made by :meth:`Allowance.serve` alone): the same fields, its states
    made on first read, from the allowance's ``basis`` with ``ahead`` requests' units still in it and
    ``elapsed_us`` since the grant (:func:`served_states`).

    Most served requests read no state but through their headers, which quotas.http.headers puts together from
    the same three (and quotas.decide.hot_path's _conclude, which knows a served decision has nothing for it):
    with five windows about 17,700 instructions less a served request, with one 4,000 (make bench-count, busy
    client; the 5-limit row's own 142,600 to 123,200 with the headers' kept numbers, 0.57x to 0.49x limits')."""

    __slots__ = ("ahead", "basis", "elapsed_us")

    basis: Basis
    ahead: int
    elapsed_us: int

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
        _STATES_SLOT.__set__(self, states)
