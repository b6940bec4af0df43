"""The adaptive controller's settings, read from ``QUOTAS['ADAPTIVE']`` in Django settings.

Read through :data:`adaptive_settings`; every attribute is looked up in
``settings.QUOTAS['ADAPTIVE']`` on each access (so ``override_settings`` works
and nothing is captured at import time), falling back to :data:`DEFAULTS`. A
key given there replaces the default as a whole (``SIGNALS`` and ``FLOORS``
too). ``adaptive/checks.py`` validates them at start-up.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

#: Signals a host sample may carry. Fractions are 0..1; ``redis_ms`` is milliseconds.
KNOWN_SIGNALS = ("cpu", "memory", "db", "redis_ms")
FRACTION_SIGNALS = ("cpu", "memory", "db")
AGGREGATES = ("max", "mean")

#: Every setting with its default. The README's adaptive settings table mirrors this.
DEFAULTS: dict[str, Any] = {
    # Default: True. False switches adaptation off: the controller publishes pinned values, else 1.0.
    # (The admin's AdaptiveConfig row can switch it off too.)
    "ENABLED": True,
    # Default: 5.0. Seconds between controller runs; config/settings.py's beat entry uses the same value.
    "INTERVAL": 5.0,
    # Default: 1.0. Seconds between the load samples each web process publishes (>= 1; 0 turns reporting off).
    "REPORT_INTERVAL": 1.0,
    # Default: 5.0. Seconds a published sample lives; a host silent for longer drops out.
    "SAMPLE_TTL": 5.0,
    # Default: below. Per signal: "low" (below it on every signal the fleet is healthy and limits recover),
    # "high" (at or above it limits are cut) and "critical" (cut on every run, ignoring the cooldown).
    # Only the signals named here are used; add "redis_ms" (decision round trip, ms) to use Redis latency.
    "SIGNALS": {
        "cpu": {"low": 0.60, "high": 0.80, "critical": 0.95},
        "memory": {"low": 0.80, "high": 0.90, "critical": 0.97},
        "db": {"low": 0.60, "high": 0.85, "critical": 0.97},
    },
    # Default: "max". How hosts are combined per signal: "max" (the worst host decides) or "mean".
    "AGGREGATE": "max",
    # Default: True. Also measure PostgreSQL connections in use against max_connections, once per run.
    "DB_SERVER_SIGNAL": True,
    # Default: 2.0. Time constant (seconds) of the EWMA that decides cuts (it follows the load both ways).
    "FAST_SECONDS": 2.0,
    # Default: 20.0. Time constant (seconds) with which the EWMA deciding recovery falls (it rises as fast as
    # the other), so a brief dip does not count as recovery.
    "SLOW_SECONDS": 20.0,
    # Default: 0.7. Multiplicative decrease of the capacity level per cut.
    "DECREASE_FACTOR": 0.7,
    # Default: 10.0. Seconds between two cuts (time for a cut to show in the load), unless critical.
    "DECREASE_COOLDOWN": 10.0,
    # Default: 10.0. Seconds every (slow) signal must stay below "low" before limits start recovering.
    "RECOVERY_DELAY": 10.0,
    # Default: 0.02. Additive increase of the capacity level per second of recovery (0.1 to 1 in 45 s).
    "RECOVERY_RATE": 0.02,
    # Default: 0.05. The lowest capacity level; every plan is then at (or near) its floor.
    "MIN_LEVEL": 0.05,
    # Default: 60.0. Seconds the multipliers are held when no host reports; then they recover.
    "NO_SIGNAL_HOLD": 60.0,
    # Default: 0.1. The lowest multiplier of a plan not named in FLOORS.
    "DEFAULT_FLOOR": 0.1,
    # Default: {"enterprise": 0.8}. Lowest multiplier per plan slug.
    "FLOORS": {"enterprise": 0.8},
    # Default: 60.0. Seconds the published multipliers live: if the controller stops, limits return to 1.0.
    "PUBLISH_TTL": 60.0,
    # Default: 7. Days AdaptiveSnapshot rows are kept.
    "RETENTION_DAYS": 7,
}


class AdaptiveSettings:
    """Attribute access to ``settings.QUOTAS['ADAPTIVE']`` with :data:`DEFAULTS` filled in."""

    def __getattr__(self, name: str) -> Any:
        if name not in DEFAULTS:
            raise AttributeError(f"Invalid QUOTAS['ADAPTIVE'] setting: {name!r}")
        user = self.user_settings()
        return user.get(name, DEFAULTS[name]) if isinstance(user, dict) else DEFAULTS[name]

    def user_settings(self) -> Any:
        """The project's adaptive settings, raw (for checks): ``QUOTAS['ADAPTIVE']``, else ``{}``."""
        quotas = getattr(settings, "QUOTAS", None)
        value = quotas.get("ADAPTIVE") if isinstance(quotas, dict) else None
        return value if value is not None else {}


adaptive_settings = AdaptiveSettings()
