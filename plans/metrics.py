"""The plans app's series on /metrics, computed at each scrape (see quotas.metrics.add_default_series)."""

from __future__ import annotations

from collections.abc import Iterator

from django.utils import timezone

from quotas.metrics import DefaultSeries

from .models import ClientBan


def active_ban_series() -> Iterator[DefaultSeries]:
    """``quota_active_bans``: the bans in force now (each ban the engine starts is recorded as a ClientBan).

    One COUNT per scrape, on the rows not lifted; a ban's end is its ``until``, so nothing has to mark it.
    """
    yield {}, ClientBan.objects.filter(lifted_at__isnull=True, until__gt=timezone.now()).count()
