"""The reference model of the money rules the state machine (test_money_machine.py) runs the service against.

Pure Python, in micro-units, no product code: what each request should be charged, which limit should refuse
it, what each counter should hold and which budget alerts should be sent. The rules, as the product documents
them (docs/concepts.md, plans/rules.py, quotas/signals.py):

- A plan's budget of a period counts its own spend (its counter is the budget's: a plan change to another
  budget starts another counter). A customer's cap of the period lowers that budget and shares its counter;
  with no budget of its period it is a budget of its own, with its own counter. A key's cap counts the key's
  own spend, shared by the keys rolled from it.
- A request is admitted when, for every limit in force, what its period has spent plus the request's estimate
  is at most the limit's amount; it is then charged its actual cost (nothing when it ends in a 5xx), and a
  refused request is charged nothing. Days and months are calendar periods where BUDGET_TIME_ZONE says
  (UTC by default); when it moves, a counter whose period ends within half a period of the new one's end is
  that period still (its spend and alert levels carry over, period.lua), any other is an ended period's.
- A counter holds at most the amount in force at an admission plus that request's cost beyond its estimate;
  while allowances are live in several processes, each process's largest such excess adds to the others'
  (docs/concepts.md, "Overspend window").
- A streamed response is a request settled when its body ends, or when it is closed first (its client gone):
  charged what its body reported by then, else its estimate; one whose body fails midway, as a failed request. A
  GraphQL batch is one request weighing the sum of its operations' complexities, its estimate the price per
  unit times that weight (the machine maps both onto :meth:`Money.request`).
- A plan's period quota counts the requests it admits, failed or not, in its own unit (its alerts report
  counts, not money).
- A limit's 80 % and 100 % thresholds are each reported once per limit and period, when its committed spend
  reaches them; 100 % also when a request is refused by a limit that has spent 80 % or more (quotas/signals.py).
  A limit is a counter and the amount it is limited by (quotas/contract/lua/period.lua): a customer's cap
  lowering a budget shares its counter but is a limit of its own, and so is each amount a cap is set to; a
  counter's state keeps, beside the level of the amount it was last limited by, those of three other amounts
  at most (the largest reached), so an amount forgotten reports its thresholds again.
- A customer's own thresholds are reported by the request whose committed spend crosses them, of each money
  limit (a key's cap too) and of the budget a cap lowers, once per limit, name, period and percent; one that no
  spend crossed (set, or a cap lowered, after the spend passed it) by the watcher's next look.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

#: The thresholds the platform reports (percent).
THRESHOLDS = (80, 100)
PERIODS = ("day", "month")


def period_end(period: str, now: float, tz: str = "UTC") -> float:
    """The end (epoch seconds) of the calendar ``period`` holding ``now`` in time zone ``tz``."""
    at = datetime.fromtimestamp(now, ZoneInfo(tz))
    if period == "day":
        return (datetime(at.year, at.month, at.day, tzinfo=at.tzinfo) + timedelta(days=1)).timestamp()
    return datetime(at.year + at.month // 12, at.month % 12 + 1, 1, tzinfo=at.tzinfo).timestamp()


def period_start(period: str, now: float, tz: str = "UTC") -> float:
    """The start (epoch seconds) of the calendar ``period`` holding ``now`` in time zone ``tz``."""
    at = datetime.fromtimestamp(now, ZoneInfo(tz))
    if period == "day":
        return datetime(at.year, at.month, at.day, tzinfo=at.tzinfo).timestamp()
    return datetime(at.year, at.month, 1, tzinfo=at.tzinfo).timestamp()


def first_january(now: float) -> float:
    """Noon on 11 January of the first year after ``now``'s that is not a leap year (every example starts there,
    so the days and months it crosses are the same in each replay)."""
    year = datetime.fromtimestamp(now, UTC).year + 1
    while year % 4 == 0:
        year += 1
    return datetime(year, 1, 11, 12, tzinfo=UTC).timestamp()


def level_of(used: int, limit: int) -> int:
    """How many thresholds ``used`` of ``limit`` has reached (0, 1: 80 %, 2: 100 %); nothing spent is none."""
    if used <= 0:
        return 0
    if used >= limit:
        return 2
    return 1 if used * 100 >= limit * 80 else 0


@dataclass(frozen=True)
class Window:
    """A money limit in force for a key: the counter it spends from, its name and its amount."""

    counter: str
    name: str
    period: str
    amount: int
    unit: str = "money"  # or "requests": a period quota, which counts every admitted request as 1

    def cost(self, money: int) -> int:
        """What a request costing ``money`` counts in this limit."""
        return money if self.unit == "money" else 1


@dataclass
class Plan:
    """A plan as the model knows it: its price for the priced scope and its budgets (period -> (pk, name, amount))."""

    slug: str
    price: int
    pk: int = 0
    budgets: dict[str, tuple[int, str, int]] = field(default_factory=dict)
    allowances: bool = False  # local allowances on (the plan's switch)
    #: Period quotas counted in requests: (pk, name, period, requests).
    quotas: list[tuple[int, str, str, int]] = field(default_factory=list)


@dataclass
class Key:
    """An API key: its raw value, its id, the id its counters go by (a rolled key's predecessor's) and its cap."""

    raw: str
    kid: int
    counters: int
    cap: tuple[str, int] | None = None
    usable: bool = True
    expires: float | None = None  # when it stops working (a rolled key's overlap ends), on the engine's clock


@dataclass
class Alert:
    """One budget alert as the signal reports it."""

    name: str
    threshold: int
    period_start: float
    spent: int
    amount: int


@dataclass
class Money:
    """One subscription's money state: its plan, caps, keys, counters and the alerts it should have had."""

    plan: Plan
    caps: dict[str, int] = field(default_factory=dict)
    keys: list[Key] = field(default_factory=list)
    #: counter -> (period end, used); a counter of an ended period holds nothing.
    counters: dict[str, tuple[float, int]] = field(default_factory=dict)
    #: counter -> (period end, {amount: alert level reported}) (a limit's thresholds, once per period).
    levels: dict[str, tuple[float, dict[int, int]]] = field(default_factory=dict)
    #: counter -> the most its period may hold: the amount in force at an admission plus that request's actual
    #: cost beyond its estimate (docs/concepts.md, "Overspend window"; one request in flight at a time here).
    ceilings: dict[str, tuple[float, int]] = field(default_factory=dict)
    #: (counter, process) -> the largest excess over its estimate of a request that process was charged while
    #: allowances are live: each process's allowances may admit one beyond the budget (docs/concepts.md,
    #: "Overspend window": across processes, the excess of each process's until its first upward reconciliation).
    excess: dict[tuple[str, int], int] = field(default_factory=dict)
    billed: int = 0  # every admitted request's actual cost, over all periods
    tz: str = "UTC"  # BUDGET_TIME_ZONE
    #: The customer's own alert thresholds (percents), and those reported: (counter, name, period end, percent).
    thresholds: list[int] = field(default_factory=list)
    reported: set[tuple[str, str, float, int]] = field(default_factory=set)

    def windows(self, key: Key) -> list[Window]:
        """The money limits in force for a request with ``key``, as plans/rules.py builds them."""
        out = []
        for period in PERIODS:
            cap = self.caps.get(period)
            if period in self.plan.budgets:
                pk, name, amount = self.plan.budgets[period]
                if cap is not None and cap < amount:
                    out.append(Window(f"b{pk}", f"{period}-cap", period, cap))
                else:
                    out.append(Window(f"b{pk}", name, period, amount))
            elif cap is not None:
                out.append(Window(f"c-{period}", f"{period}-cap", period, cap))
        if key.cap is not None:
            period, amount = key.cap
            out.append(Window(f"kc{key.counters}:{period}", f"key-{period}-cap", period, amount))
        out += [Window(f"q{pk}", name, period, units, "requests") for pk, name, period, units in self.plan.quotas]
        return out

    def used(self, window: Window, now: float) -> int:
        """What ``window``'s counter has spent in the period holding ``now``."""
        end, used = self.counters.get(window.counter, (0.0, 0))
        return used if self.live(end, window.period, now) else 0

    def ceiling(self, window: Window, now: float) -> int:
        """The most ``window``'s counter may hold now (at least what it held when its period began: nothing)."""
        end, most = self.ceilings.get(window.counter, (0.0, 0))
        return most if self.live(end, window.period, now) else 0

    def spent(self, counter: str, period: str, now: float) -> int:
        """What ``counter`` (of a ``period``) has spent in the period holding ``now``."""
        end, used = self.counters.get(counter, (0.0, 0))
        return used if self.live(end, period, now) else 0

    def live(self, stored: float, period: str, now: float) -> float:
        """The end naming the ``period`` that holds ``now`` when a state stored under the end ``stored`` is that
        period's (the same end, or one within half a period of it: BUDGET_TIME_ZONE moved; the later end names
        it), else 0: an ended period's."""
        end, start = period_end(period, now, self.tz), period_start(period, now, self.tz)
        return max(stored, end) if stored >= end or (end - stored) * 2 < end - start else 0.0

    def end_of(self, counter: str, period: str, now: float) -> float:
        """The end naming the period of ``counter`` that holds ``now`` (a carried-over state's, or the new one's)."""
        stored = self.counters.get(counter, (0.0, 0))[0]
        return self.live(stored, period, now) or period_end(period, now, self.tz)

    def levels_of(self, counter: str, period: str, now: float, write: bool = False) -> dict[int, int]:
        """The alert levels of ``counter`` in the period holding ``now`` (kept when ``write``)."""
        end, levels = self.levels.get(counter, (0.0, {}))
        live = self.live(end, period, now)
        if not live:
            live, levels = period_end(period, now, self.tz), {}
        if write:
            self.levels[counter] = (live, levels)
        return levels

    def refusing(self, key: Key, estimate: int, now: float) -> list[Window]:
        """The limits that refuse a request estimated at ``estimate`` (none: it is admitted)."""
        return [w for w in self.windows(key) if self.used(w, now) + w.cost(estimate) > w.amount]

    def request(
        self, key: Key, estimate: int, charged: int, now: float, failed: bool = False
    ) -> tuple[list[Window], list[Alert]]:
        """A request with ``key``: the limits that refused it, and the alerts it should send. Admitted, it is
        charged ``charged`` (its actual cost, or 0 when the view ``failed``; a period quota counts it as 1
        either way: no limit of these refunds errors)."""
        refused = self.refusing(key, estimate, now)
        alerts: list[Alert] = []
        if refused:
            for w in refused:
                used = self.used(w, now)
                if level_of(used, w.amount) >= 1 or w.amount <= 0:
                    alerts += [a for a in self._raise(w, 2, used, now) if a.threshold == 100]  # that one only
            return refused, alerts
        for w in self.windows(key):
            self._keep(w, now)  # an admission writes its counters' states (below: before its own level)
        self.charge(key, estimate, charged, now)
        for w in self.windows(key):
            used = self.used(w, now)
            alerts += self._raise(w, level_of(used, w.amount), used, now)
        return [], alerts

    def outage_bound(self, key: Key, before: dict[str, int], share: float, excess: int, now: float) -> None:
        """Raise the most each budget of ``key`` may hold after an outage in which one process's local fallback
        admitted requests costing ``excess`` beyond their estimates: what it held before (``before``, by counter),
        plus its ``share`` of the remainder it last saw from Redis (at most the whole amount), plus that excess
        (docs/concepts.md, the local failure mode: the charge-back may leave a budget overspent by that much)."""
        for w in self.windows(key):
            if w.unit == "money":
                end = self.end_of(w.counter, w.period, now)
                most = before.get(w.counter, 0) + int(share * w.amount) + excess
                self.ceilings[w.counter] = (end, max(self.ceiling(w, now), most))

    def charge(
        self, key: Key, estimate: int, charged: int, now: float, quotas: bool = True, process: int | None = None
    ) -> None:
        """An admitted request with ``key`` charged ``charged``: its limits' counters and the billed usage. (With
        local allowances on, or Redis away, the machine calls this for what the service admitted: the model does
        not predict which requests an allowance or the local fallback admits.) ``quotas`` False: its period
        quotas do not count it (one admitted during an outage is not charged back to them). ``process``: the
        process whose allowances may have admitted it (None: Redis decided it), whose excess adds to the others'
        in the bound until the allowances end (:meth:`allowances_ended`)."""
        for w in self.windows(key):
            if w.unit != "money" and not quotas:
                continue
            end = self.end_of(w.counter, w.period, now)
            self.counters[w.counter] = (end, self.used(w, now) + w.cost(charged))
            over = max(0, w.cost(charged) - w.cost(estimate))
            if process is not None:
                mine = self.excess[w.counter, process] = max(self.excess.get((w.counter, process), 0), over)
                over = mine + sum(x for (c, p), x in self.excess.items() if c == w.counter and p != process)
            most = max(self.ceiling(w, now), w.amount + over)
            self.ceilings[w.counter] = (end, most)
        self.billed += charged

    def allowances_ended(self) -> None:
        """Every process's allowances ended: each budget is charged in Redis again, its excess one request's."""
        self.excess.clear()

    def crossed(self, key: Key, before: dict[str, int], now: float, first: int = 0) -> list[tuple[str, int, int]]:
        """The customer's thresholds an admitted request with ``key`` crossed, its limits' counters having held
        ``before`` (by counter): (name, percent, spent) of each money limit (a key's cap too) and of the budget a
        cap lowers, whose spend went from below the percent to at or above it, once per limit, name, period and
        percent, with the spend then (docs/notifications.md: recorded as the request is settled). ``first``: the
        part committed first (the estimate of a request whose settlement Redis did not take), whose thresholds
        report the spend with it alone; the rest report the spend once the rest was charged."""
        found = []
        for w in self.windows(key):
            if w.unit != "money":
                continue
            spent, end = self.used(w, now), self.end_of(w.counter, w.period, now)
            start = before.get(w.counter, 0)
            middle = min(spent, start + first) if first else spent
            for name, amount in self._targets(w):
                for percent in self.thresholds:
                    crossed = amount > 0 and start * 100 < amount * percent <= spent * 100
                    if crossed and self._report(w, name, end, percent, now):
                        found.append((name, percent, middle if amount * percent <= middle * 100 else spent))
        return sorted(found)

    def threshold_events(self, now: float) -> list[tuple[str, int, int]]:
        """The customer's thresholds the subscription's spend has reached and nothing reported yet, as the
        watcher finds them (notifications/thresholds.py: a threshold set, or a cap lowered, after the spend passed
        it): (name, percent, spent) of each budget and cap (a cap is watched against the budget it lowers too),
        once per limit, name, period and percent. A key's cap is not the subscription's: not watched."""
        found = []
        for w in self.windows(Key(raw="", kid=0, counters=0)):
            if w.unit != "money":
                continue
            spent, end = self.used(w, now), self.end_of(w.counter, w.period, now)
            for name, amount in self._targets(w):
                for percent in self.thresholds:
                    if amount > 0 and spent * 100 >= amount * percent and self._report(w, name, end, percent, now):
                        found.append((name, percent, spent))
        return sorted(found)

    def _targets(self, window: Window) -> list[tuple[str, int]]:
        """What a customer's thresholds are percents of for ``window``: its amount, and for a cap lowering a budget
        the budget's too."""
        amounts = [(window.name, window.amount)]
        budget = self.plan.budgets.get(window.period)
        if window.counter.startswith("b") and budget is not None and budget[2] > window.amount:
            amounts.append((budget[1], budget[2]))
        return amounts

    def _report(self, window: Window, name: str, end: float, percent: int, now: float) -> bool:
        """Whether ``percent`` of ``window`` (as ``name``) in the period ending at ``end`` is still to be reported
        (then it is, from now on): not under that end, nor one within half a period of it (BUDGET_TIME_ZONE
        moved: the same period, carried over)."""
        half = (end - period_start(window.period, now, self.tz)) / 2
        if any(r[:2] == (window.counter, name) and r[3] == percent and abs(r[2] - end) < half for r in self.reported):
            return False
        self.reported.add((window.counter, name, end, percent))
        return True

    def _keep(self, window: Window, now: float) -> dict[int, int]:
        """The levels ``window``'s counter keeps when its state is written limited by ``window``'s amount:
        that amount's, and three others at most (the largest reached), as period.lua's period_state."""
        levels = self.levels_of(window.counter, window.period, now, write=True)
        others = sorted(a for a, level in levels.items() if a != window.amount and level > 0)[-3:]
        kept = {a: levels[a] for a in others}
        kept[window.amount] = levels.get(window.amount, 0)
        levels.clear()
        levels.update(kept)
        return levels

    def _raise(self, window: Window, level: int, used: int, now: float) -> list[Alert]:
        """The alerts of ``window`` reaching ``level`` (those its limit has not reported this period)."""
        before = self.levels_of(window.counter, window.period, now).get(window.amount, 0)
        if level <= before:
            return []  # nothing written
        self._keep(window, now)[window.amount] = level
        start = period_start(window.period, now, self.tz)
        return [
            Alert(window.name, threshold, start, used, window.amount)
            for bit, threshold in enumerate(THRESHOLDS, start=1)
            if before < bit <= level
        ]
