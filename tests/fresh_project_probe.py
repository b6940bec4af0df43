"""Run inside the fresh project of tests/test_fresh_project.py, with that virtualenv's python.

It imports only what the wheel and Django provide (never this repository's
tests), drives the project with Django's test client as a user's browser or
API client would, and prints one JSON object on its last line of output.

Usage: ``python fresh_project_probe.py where|throttle|admin|usage|labels`` in the
project's folder, with ``DJANGO_SETTINGS_MODULE`` set.
"""

from __future__ import annotations

import json
import re
import sys
from datetime import timedelta
from typing import Any

import django

django.setup()

from django.contrib import admin  # noqa: E402  (after setup: the app registry must be ready)
from django.contrib.auth import get_user_model  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402
from django.utils import timezone  # noqa: E402

RAW_KEY = re.compile(r"qk_[A-Za-z0-9_-]{20,}")
#: What the second step of an action with an intermediate page posts (as its form's submit button does).
CONFIRM: dict[str, dict[str, str]] = {"issue_api_key": {"issue": "1", "expires": ""}}

setup_test_environment()  # the test client's host name is allowed; mail stays in memory


def answer(response: Any) -> dict[str, Any]:
    """What a client sees of a response: status, headers and body."""
    return {
        "status": response.status_code,
        "headers": dict(response.headers),
        "body": response.content.decode(errors="replace")[:4000],
    }


def where() -> dict[str, Any]:
    """Where the apps were imported from (the virtualenv's site-packages, not the checkout)."""
    import dashboard
    import plans
    import quotas
    import usage

    return {module.__name__: module.__file__ for module in (quotas, plans, usage, dashboard)}


def throttle() -> dict[str, Any]:
    """Four anonymous requests to the project's DRF view."""
    client = Client(raise_request_exception=False)
    return {"answers": [answer(client.get("/api/ping")) for _ in range(4)]}


def drf_settings() -> dict[str, Any]:
    """What DRF reads of the project's REST_FRAMEWORK once the platform's lines are added."""
    from rest_framework.settings import api_settings

    def dotted(classes: list[type]) -> list[str]:
        return [f"{c.__module__}.{c.__name__}" for c in classes]

    return {
        "DEFAULT_PAGINATION_CLASS": api_settings.DEFAULT_PAGINATION_CLASS.__name__,
        "PAGE_SIZE": api_settings.PAGE_SIZE,
        "DEFAULT_RENDERER_CLASSES": dotted(api_settings.DEFAULT_RENDERER_CLASSES),
        "DEFAULT_AUTHENTICATION_CLASSES": dotted(api_settings.DEFAULT_AUTHENTICATION_CLASSES),
        "DEFAULT_THROTTLE_CLASSES": dotted(api_settings.DEFAULT_THROTTLE_CLASSES),
        "DEFAULT_THROTTLE_RATES": api_settings.DEFAULT_THROTTLE_RATES,
        "EXCEPTION_HANDLER": api_settings.EXCEPTION_HANDLER.__module__,
    }


def world() -> dict[str, Any]:
    """One object of each model the plans admin lists, as an operator would have after a while."""
    from django.contrib.auth.models import Group

    from plans.models import (
        ACLEntry,
        ACLFeed,
        AlertThresholds,
        APIKey,
        ClientBan,
        CostBudget,
        GroupPlan,
        Plan,
        SpendCap,
        Subscription,
    )  # fmt: skip

    free = Plan.objects.create(slug="free", name="Free")
    pro = Plan.objects.create(slug="pro", name="Pro", monthly_price=49)
    GroupPlan.objects.create(group=Group.objects.create(name="partners"), plan=pro)
    sub = Subscription.objects.create(name="ACME", plan=free)
    key, _ = APIKey.issue(sub, name="first")
    CostBudget.objects.create(plan=free, period="day", amount=5)
    SpendCap.objects.create(subscription=sub, period="day", amount=2)  # what its owners set in the console
    AlertThresholds.objects.create(subscription=sub, percents=[50, 90])
    ban = ClientBan.objects.create(client=f"s.{sub.pk}", subscription=sub, until=timezone.now() + timedelta(hours=1))
    acl = ACLEntry.objects.create(action="deny", cidr="203.0.113.0/24", reason="probe")
    # As a feed is after its first good fetch (refreshing it here fails offline: recorded, the list kept).
    feed = ACLFeed.objects.create(
        name="blocklist", source="https://feeds.example.com/block.txt", action="deny", entries="198.51.100.0/24",
        entry_count=1, fetched_at=timezone.now(),
    )  # fmt: skip
    return {"free": free, "pro": pro, "sub": sub, "key": key, "ban": ban, "acl": acl, "feed": feed}


def admin_actions() -> dict[str, Any]:
    """Every page and every action of the plans admin, as a signed-in superuser; each answer's status."""
    objects = world()
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw-for-the-probe-1")
    browser = Client(raise_request_exception=False)
    browser.force_login(user)
    statuses: dict[str, int] = {}
    errors: dict[str, str] = {}
    raw_keys: list[str] = []

    def visit(label: str, response: Any) -> Any:
        statuses[label] = response.status_code
        if response.status_code >= 500:
            errors[label] = response.content.decode(errors="replace")[:2000]
        return response

    for model in [m for m in admin.site._registry if m._meta.app_label == "quota_plans"]:
        base = f"/admin/quota_plans/{model._meta.model_name}/"
        page = visit(f"GET {base}", browser.get(base))
        visit(f"GET {base}add/", browser.get(f"{base}add/"))
        obj = model._default_manager.first()
        if obj is None:
            statuses[f"{base}: no object to act on"] = 0
            continue
        visit(f"GET {base}{obj.pk}/change/", browser.get(f"{base}{obj.pk}/change/"))
        for action in sorted(set(re.findall(r'<option value="([a-z_]+)"', page.content.decode())) - {""}):
            step = {"action": action, "_selected_action": [str(obj.pk)]}
            visit(f"POST {base} {action}", browser.post(base, step))
            if action == "move_to_plan":
                confirm = {"apply": "1", "plan": str(objects["pro"].pk)}
            else:
                confirm = CONFIRM.get(action, {})
            if confirm:
                second = visit(f"POST {base} {action} (confirmed)", browser.post(base, {**step, **confirm}))
                raw_keys += RAW_KEY.findall(second.content.decode(errors="replace"))

    from plans.models import APIKey, ClientBan

    objects["sub"].refresh_from_db()
    return {
        "statuses": statuses,
        "errors": errors,
        "raw_keys": raw_keys,
        "keys_revoked": APIKey.objects.filter(revoked_at__isnull=False).count(),
        "bans_lifted": ClientBan.objects.filter(lifted_at__isnull=False).count(),
        "moved_to": objects["sub"].plan.slug,
    }


def usage() -> dict[str, Any]:
    """The usage API, called with a key after one request, and without one."""
    from plans.models import APIKey, Plan, Subscription

    sub = Subscription.objects.create(name="ACME", plan=Plan.objects.create(slug="free", name="Free"))
    _, raw = APIKey.issue(sub)
    client = Client(raise_request_exception=False)
    ping = answer(client.get("/api/ping", HTTP_X_API_KEY=raw))
    return {
        "ping": ping,
        "report": answer(client.get("/api/v1/usage/", HTTP_X_API_KEY=raw)),
        "current": answer(client.get("/api/v1/usage/current", HTTP_X_API_KEY=raw)),
        "anonymous": answer(client.get("/api/v1/usage/")),
    }


def mounted() -> dict[str, Any]:
    """The views the Operations page mounts: anonymously, then as a superuser (a usage-page sign-in form)."""
    user = get_user_model().objects.create_superuser("staff", "staff@example.com", "pw-for-the-probe-2")
    anonymous = Client(raise_request_exception=False)
    staff = Client(raise_request_exception=False)
    staff.force_login(user)
    paths = ("/healthz", "/metrics", "/dashboard/", "/usage/", "/api/v1/usage/")
    return {
        "anonymous": {path: anonymous.get(path).status_code for path in paths},
        "staff": {path: staff.get(path).status_code for path in paths},
    }


def labels() -> dict[str, Any]:
    """The project's own ``plans`` and ``usage`` apps beside ours: every app's label, the tables of the models
    both name alike, rows written through each (one plan apiece), and each one's admin list as a superuser."""
    from django.apps import apps
    from django.urls import reverse

    alike = ["plans.Plan", "quota_plans.Plan", "usage.UsageRecord", "quota_usage.UsageRecord"]
    models = {name: apps.get_model(name) for name in alike}
    models["plans.Plan"].objects.create(name="theirs")
    models["quota_plans.Plan"].objects.create(slug="ours", name="Ours")
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw-for-the-probe-1")
    browser = Client(raise_request_exception=False)
    browser.force_login(user)
    return {
        "labels": {config.name: config.label for config in apps.get_app_configs()},
        "tables": {name: model._meta.db_table for name, model in models.items()},
        "rows": {name: models[name].objects.count() for name in ("plans.Plan", "quota_plans.Plan")},
        "admin": {
            name: browser.get(reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")).status_code
            for name, model in models.items()
        },
    }


def _statuses(responses: list[Any]) -> dict[str, Any]:
    return {"statuses": [r.status_code for r in responses], "headers": "RateLimit" in responses[-1].headers}


def migration_drf() -> dict[str, Any]:
    """The migration guide's DRF project: anonymous requests to each view, each from an address of its own."""
    client = Client(raise_request_exception=False)
    return {
        "ping": _statuses([client.get("/api/ping", REMOTE_ADDR="198.51.100.1") for _ in range(4)]),
        "upload": _statuses([client.get("/api/upload", REMOTE_ADDR="198.51.100.2") for _ in range(3)]),
        "burst": _statuses([client.get("/api/burst", REMOTE_ADDR="198.51.100.3") for _ in range(5)]),
        "tenant": _statuses([
            client.get("/api/tenant", REMOTE_ADDR="198.51.100.4", HTTP_X_TENANT=tenant) for tenant in "aaab"
        ]),
    }  # fmt: skip


def migration_ratelimit() -> dict[str, Any]:
    """The migration guide's django-ratelimit views: four GETs of one address, three POSTs of one token."""
    client = Client(raise_request_exception=False)
    hello = [client.get("/rl/hello", REMOTE_ADDR="198.51.100.5") for _ in range(4)]
    submit = [client.post("/rl/submit", HTTP_X_API_TOKEN="t-1", REMOTE_ADDR="198.51.100.6") for _ in range(3)]
    return {**_statuses(hello), "limited": [r.json()["limited"] for r in submit]}


def notify() -> dict[str, Any]:
    """A subscription priced 0.01 a ping with a 0.02 day budget, its webhook endpoint (RECEIVER_URL) and e-mail
    contact, then two pings: the second spends the whole budget. The events are committed; a worker sends them."""
    import os
    from decimal import Decimal

    from notifications.models import Contact, Endpoint
    from notifications.secrets import encrypt, new_secret
    from plans.models import APIKey, CostBudget, EndpointLimit, Plan, Subscription

    plan = Plan.objects.create(slug="metered", name="Metered")
    EndpointLimit.objects.create(plan=plan, name="global", rates="100/min", price=Decimal("0.01"))
    CostBudget.objects.create(plan=plan, period="day", amount=Decimal("0.02"))
    sub = Subscription.objects.create(name="ACME", plan=plan)
    _, raw = APIKey.issue(sub)
    secret = new_secret()
    Endpoint.objects.create(subscription=sub, url=os.environ["RECEIVER_URL"], secret_encrypted=encrypt(secret))
    Contact.objects.create(subscription=sub, email="billing@acme.example")
    client = Client(raise_request_exception=False)
    statuses = [client.get("/api/ping", HTTP_X_API_KEY=raw).status_code for _ in range(2)]
    return {"statuses": statuses, "secret": secret}


if __name__ == "__main__":
    probes = {
        "where": where, "throttle": throttle, "admin": admin_actions, "usage": usage, "labels": labels,
        "mounted": mounted, "drf_settings": drf_settings, "migration_drf": migration_drf,
        "migration_ratelimit": migration_ratelimit, "notify": notify,
    }  # fmt: skip
    print(json.dumps(probes[sys.argv[1]](), default=str))
