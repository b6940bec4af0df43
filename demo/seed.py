"""The demo's plans, read from demo/plans.yaml through the plans-as-code reader (``manage.py quota_plans``), and
one API key per plan derived from SECRET_KEY."""

from __future__ import annotations

import hashlib
import hmac
from functools import cache
from pathlib import Path

from django.conf import settings

from plans.models import API_KEY_PREFIX
from plans.plansfile import Document, load

#: The demo's plans file.
PLANS_FILE = Path(__file__).resolve().with_name("plans.yaml")


@cache
def demo_plans() -> Document:
    """demo/plans.yaml, checked (read once: it ships with the code)."""
    return load(PLANS_FILE.read_text(encoding="utf-8"), "yaml")


def demo_key(slug: str) -> str:
    """A stable raw key per demo plan (derived from SECRET_KEY), so seeding can reprint it."""
    digest = hmac.new(settings.SECRET_KEY.encode(), f"demo-key:{slug}".encode(), hashlib.sha256).hexdigest()
    return f"{API_KEY_PREFIX}demo_{slug}_{digest[:24]}"
