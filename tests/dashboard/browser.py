"""What the Chromium tests share: where Chromium and the screenshots are, and the steps they repeat.

The fixtures (``chromium``, ``page``, ``live_demo``) are in this folder's conftest.py.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from collections import Counter
from email.message import Message
from pathlib import Path

from quotas.engine import default_engine
from tests.factories import UserFactory

BASE_DIR = Path(__file__).resolve().parents[2]
ARTIFACTS = BASE_DIR / "test-artifacts"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
PASSWORD = "pw-for-tests-1"


def get(url: str, key: str) -> tuple[int, Message]:
    request = urllib.request.Request(url, headers={"X-API-Key": key})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.headers
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers


def burst(base: str, key: str, n: int, path: str = "/api/demo/search?q=x") -> Counter:
    codes = Counter(get(base + path, key)[0] for _ in range(n))
    runtime = default_engine.runtime()
    runtime.guard.usage.flush_usage()  # the engine's batched counts into Redis (its poller does this every second)
    runtime.history.write(runtime.store.history)  # and the per-minute history (also the poller's job)
    return codes


def log_in(page, base: str, username: str) -> None:
    UserFactory(username=username, is_staff=True, is_superuser=True)
    page.goto(f"{base}/admin/login/?next=/dashboard/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"{base}/dashboard/")


def chart_sum(page, canvas: str, label: str) -> int:
    return page.evaluate(
        """([canvas, label]) => {
            const chart = Chart.getChart(canvas);
            const ds = chart.data.datasets.find(d => d.label === label);
            return ds.data.reduce((a, b) => a + b, 0);
        }""",
        [canvas, label],
    )


def chart_refused(page, canvas: str) -> int:
    """Every refusal drawn on a traffic chart (all reasons; shadow refusals were admitted)."""
    return sum(chart_sum(page, canvas, label) for label in chart_labels(page, canvas) if label.startswith("denied: "))


def chart_labels(page, canvas: str) -> list[str]:
    return page.evaluate("(canvas) => Chart.getChart(canvas).data.datasets.map(d => d.label)", canvas)


def choose_range(page, value: str, points: int) -> None:
    """Pick a range in the form; the next feed (no reload) redraws the traffic chart with ``points`` points."""
    page.select_option("#range", value)
    page.wait_for_function(f"Chart.getChart('chart-traffic').data.labels.length === {points}")
