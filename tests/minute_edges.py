"""A test that failed while the wall clock crossed a minute's edge runs once more (a pytest plugin).

A test marked ``redis`` may count a few requests against real-time fixed windows such as "3/min", on the
session's redis-server, whose clock (this machine's) no test can move. One whose requests straddle a window's edge
legitimately gets a second quota, which would read as over-admission. Instead of waiting before every test for
the edge to pass (which cost a second in every sixty, and still missed longer tests), a test that failed across
an edge is run again: its second run starts after the edge, and tells whether the failure was the edge's. A test
that fails without crossing an edge fails at once, and so does every test not marked ``redis``: it runs on the
memory store, whose clock stands still until the test moves it (``quota_clock``).
"""

from __future__ import annotations

import time

import pytest
from _pytest.runner import runtestprotocol

#: What the test is told when it ran twice (``record_property``): the reason, in the junit XML and the reports.
RERUN = ("rerun", "failed while the clock crossed a minute's edge")


def crossed_a_minute(started: float, ended: float) -> bool:
    """Whether a fixed window of a minute (aligned to the epoch, as the decision script's) ends in between."""
    return int(started // 60) != int(ended // 60)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool:
    """pytest's own protocol (log start, setup, call, teardown, log finish), with the one rerun above."""
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    started = time.time()
    reports = runtestprotocol(item, nextitem=nextitem, log=False)
    failed = any(report.failed for report in reports)
    if failed and item.get_closest_marker("redis") and crossed_a_minute(started, time.time()):
        if isinstance(item, pytest.Function):
            item._initrequest()  # fresh fixture values for the second run, as pytest-rerunfailures does
        item.user_properties.append(RERUN)
        reports = runtestprotocol(item, nextitem=nextitem, log=False)
    for report in reports:
        item.ihook.pytest_runtest_logreport(report=report)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True
