"""Fixtures and helpers for the adaptive controller's tests."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from adaptive.policy import Outcome, Params, PlanInfo, State, Thresholds, step
from adaptive.reporter import stop_reporter

TRACES = Path(__file__).parent / "traces"
FREE, PRO, ENTERPRISE = 1, 2, 3

#: The defaults of adaptive.conf, as Params (tests state what they change).
DEFAULT_PARAMS = Params(
    thresholds={
        "cpu": Thresholds(0.60, 0.80, 0.95),
        "memory": Thresholds(0.80, 0.90, 0.97),
        "db": Thresholds(0.60, 0.85, 0.97),
    }
)
PLANS = (
    PlanInfo(FREE, "free", 0, 0.1),
    PlanInfo(PRO, "pro", 5, 0.3),
    PlanInfo(ENTERPRISE, "enterprise", 10, 0.8),
)


@dataclass(frozen=True)
class Run:
    """One controller run of a replayed trace."""

    t: float
    outcome: Outcome

    @property
    def m(self) -> dict[int, float]:
        return self.outcome.multipliers


def host(cpu: float | None = None, memory: float | None = 0.5, db: float | None = None, name: str = "web1") -> dict:
    """One host's sample."""
    return {"host": name, "cpu": cpu, "memory": memory, "db": db}


def cpu_trace(values: Iterable[float], every: float = 5.0, start: float = 0.0) -> list[tuple[float, list[dict]]]:
    """A trace of one host whose CPU takes ``values``, one run every ``every`` seconds."""
    return [(start + i * every, [host(cpu=v)]) for i, v in enumerate(values)]


def load_trace(name: str) -> list[tuple[float, list[dict]]]:
    """A recorded trace from ``traces/<name>.json``: ``[{"t": seconds, "samples": [...]}, ...]``."""
    return [(row["t"], row["samples"]) for row in json.loads((TRACES / f"{name}.json").read_text())]


def replay(
    trace: Sequence[tuple[float, list[dict[str, Any]]]],
    params: Params = DEFAULT_PARAMS,
    plans: Sequence[PlanInfo] = PLANS,
    state: State | None = None,
    **kwargs: Any,
) -> list[Run]:
    """Run the controller on every point of ``trace`` (time, samples), carrying its state."""
    state = state or State()
    runs = []
    for t, samples in trace:
        outcome = step(state, samples, plans, t, params, **kwargs)
        state = outcome.state
        runs.append(Run(t, outcome))
    return runs


def changes(runs: Sequence[Run], plan_id: int = FREE) -> int:
    """How many runs changed the plan's multiplier."""
    values = [r.m[plan_id] for r in runs]
    return sum(1 for a, b in itertools.pairwise(values) if a != b)


def reversals(runs: Sequence[Run], plan_id: int = FREE) -> int:
    """How often the plan's multiplier changed direction (down then up, or up then down): flapping."""
    values = [r.m[plan_id] for r in runs]
    steps = [b - a for a, b in itertools.pairwise(values) if b != a]
    return sum(1 for a, b in itertools.pairwise(steps) if (a > 0) != (b > 0))


@pytest.fixture
def no_reporter() -> Iterator[None]:
    """Stops this process's load reporter after the test (tests that start one use it)."""
    stop_reporter()
    yield
    stop_reporter()


@pytest.fixture
def enforce(settings: Any) -> None:
    """``QUOTAS['ADAPTIVE']['MODE'] = 'enforce'``: the controller's multipliers are applied (the default observes)."""
    settings.QUOTAS = {**settings.QUOTAS, "ADAPTIVE": {**settings.QUOTAS.get("ADAPTIVE", {}), "MODE": "enforce"}}
