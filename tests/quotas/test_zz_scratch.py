import os, time, collections, functools, atexit
import pytest
from tests.quotas import test_money_machine as m
from tests.quotas.test_money_machine import *  # noqa
from tests.quotas.test_money_machine import world  # noqa

T = collections.defaultdict(lambda: [0, 0.0])


def wrap(name):
    f = getattr(m.MoneyMachine, name)

    @functools.wraps(f)
    def g(self, *a, **k):
        t = time.perf_counter()
        try:
            return f(self, *a, **k)
        finally:
            T[name][0] += 1
            T[name][1] += time.perf_counter() - t

    if hasattr(f, "hypothesis_stateful_rule"):
        pass
    return g


for name in ["__init__"]:
    setattr(m.MoneyMachine, name, wrap(name))
import hypothesis.stateful as hs

orig_rule_fns = {}
for name in dir(m.MoneyMachine):
    f = getattr(m.MoneyMachine, name)
    for attr in ("hypothesis_stateful_rule", "hypothesis_stateful_invariant"):
        if hasattr(f, attr):
            inner = getattr(f, attr)
            fn = inner.function

            def mk(fn=fn, name=name):
                @functools.wraps(fn)
                def g(self, *a, **k):
                    t = time.perf_counter()
                    try:
                        return fn(self, *a, **k)
                    finally:
                        T[name][0] += 1
                        T[name][1] += time.perf_counter() - t

                return g

            object.__setattr__(inner, "function", mk())


def report():
    tot = sum(v[1] for v in T.values())
    for k, (n, s) in sorted(T.items(), key=lambda kv: -kv[1][1]):
        print(f"{k:40s} {n:6d} {s:8.2f}s {1000 * s / max(n, 1):7.1f} ms")
    print("total", tot)


atexit.register(report)
if os.environ.get("MM_EXAMPLES"):
    m.EXAMPLES = int(os.environ["MM_EXAMPLES"])
if os.environ.get("MM_STEPS"):
    m.STEPS = int(os.environ["MM_STEPS"])


def test_reload_cost(world):  # noqa
    from plans.models import Plan
    from quotas.engine import default_engine

    rules = default_engine.runtime().rules
    print("plans", Plan.objects.count())
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    t = time.perf_counter()
    for _ in range(50):
        rules.reload()
    print("reload ms", (time.perf_counter() - t) * 20)
    with CaptureQueriesContext(connection) as c:
        rules.reload()
    print(len(c.captured_queries), [q["sql"][:80] for q in c.captured_queries])
    m.WORLD[0]
    from tests.quotas.test_money_machine import MoneyMachine

    mm = MoneyMachine()
    key = mm.model.keys[0]
    from quotas.api import identify, standing
    from django.test import RequestFactory

    rules.reload()
    with CaptureQueriesContext(connection) as c:
        t = time.perf_counter()
        cl = identify(RequestFactory().get("/", HTTP_X_API_KEY=key.raw))
        print("identify ms", (time.perf_counter() - t) * 1000)
    print(len(c.captured_queries), [q["sql"][:100] for q in c.captured_queries])
    t = time.perf_counter()
    for _ in range(50):
        standing(cl)
    print("standing ms", (time.perf_counter() - t) * 20)
    t = time.perf_counter()
    for _ in range(50):
        mm.billed_usage_is_the_actual_costs()
    print("billed ms", (time.perf_counter() - t) * 20)


from quotas.runtime import rules_cache as _rc

for _name in ("reload", "_query"):
    _f = getattr(_rc.RulesCache, _name)

    def _mk(f=_f, name=_name):
        def g(self, *a, **k):
            t = time.perf_counter()
            try:
                return f(self, *a, **k)
            finally:
                T["rc." + name][0] += 1
                T["rc." + name][1] += time.perf_counter() - t

        return g

    setattr(_rc.RulesCache, _name, _mk())


def test_busy_probe(world):
    mm = m.MoneyMachine()
    mm.change_plan("busy")
    key = mm.model.keys[0]
    for i in range(6):
        mm.priced_request(key, "equal", None, 0)
        b = standing(identify(RequestFactory().get("/", HTTP_X_API_KEY=key.raw)))["budgets"]
        print(i, [(x["name"], x["spent"]) for x in b], mm.model_spent(key))
    mm.allowances_end()
    b = standing(identify(RequestFactory().get("/", HTTP_X_API_KEY=key.raw)))["budgets"]
    print("end", [(x["name"], x["spent"]) for x in b], mm.model_spent(key))
    mm.spend_is_the_models()
    mm.billed_usage_is_the_actual_costs()


def test_quota_probe(world):
    from plans.models import PeriodQuota

    plan = m.WORLD[0].plans["budgeted"]
    PeriodQuota.objects.create(plan_id=plan.pk, name="requests-per-day", scope="priced", period="day", units=5)
    mm = m.MoneyMachine()
    key = mm.model.keys[0]

    def show():
        st_ = standing(identify(RequestFactory().get("/", HTTP_X_API_KEY=key.raw)))
        return [(x["name"], x["quota"], x["remaining"]) for x in st_["limits"]]

    print("start", show())
    r = mm.client.get("/t/priced?fail=1", HTTP_X_API_KEY=key.raw)
    print(r.status_code, show())
    r = mm.client.get("/t/priced?est=0.04", HTTP_X_API_KEY=key.raw)
    print(r.status_code, show())
    for i in range(5):
        r = mm.client.get("/t/priced", HTTP_X_API_KEY=key.raw)
        print(r.status_code, show(), r.json() if r.status_code == 429 else "")
    print(
        [
            (a["budget"], a["threshold"], a["spent_micros"], a["amount_micros"], a["unit"], a["currency"], a["limit"])
            for a in m.WORLD[0].alerts
        ]
    )


def test_quota_probe2(world):
    mm = m.MoneyMachine()
    key = mm.model.keys[0]

    def show():
        st_ = standing(identify(RequestFactory().get("/", HTTP_X_API_KEY=key.raw)))
        return [(x["name"], x["quota"], x["remaining"]) for x in st_["limits"]], [
            (x["name"], x["spent"]) for x in st_["budgets"]
        ]

    print("start", show())
    for q in [
        "est=0.04&actual=0.05",
        "est=0.01",
        "est=0.02&actual=0.01",
        "est=0.01&actual=0.05",
        "est=0.01&actual=0.005",
    ]:
        r = mm.client.get("/t/priced?" + q, HTTP_X_API_KEY=key.raw)
        print(q, r.status_code, show())


def test_threshold_probe(world):
    mm = m.MoneyMachine()
    key = mm.model.keys[0]
    mm.set_thresholds((10,))
    mm.priced_request(key, "equal", None, 0)
    mm.watcher_visit()
    mm.change_plan("day-only")
    mm.priced_request(key, "equal", None, 0)
    mm.watcher_visit()


@pytest.mark.redis
@pytest.mark.parametrize("fault", ["lost reply", "Redis error"])
def test_fault_probe(world, fault):
    mm = m.MoneyMachine()
    key = mm.model.keys[0]
    for more in (5, 5, 0):
        mm.settle_with_a_fault(0, fault, more)
        print(fault, more, mm.model_spent(key), m.WORLD[0].proxy.cuts)
        mm.spend_is_the_models()
        mm.billed_usage_is_the_actual_costs()


@pytest.mark.redis
def test_outage_probe(world):
    mm = m.MoneyMachine()
    key = mm.model.keys[0]
    mm.priced_request(key, "equal", 40000, 0)
    mm.redis_outage(0, [("equal", None, 0), ("above", 20000, 50), ("equal", None, 0), ("equal", None, 0)])
    print(mm.model_spent(key), [(a["budget"], a["threshold"], a["spent_micros"]) for a in m.WORLD[0].alerts])
    mm.spend_is_the_models()
    mm.billed_usage_is_the_actual_costs()
    mm.priced_requests(0, [("equal", None, 0)] * 3)
    mm.spend_is_the_models()
