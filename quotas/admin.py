"""Admin: an action on the users' list that lifts their failed sign-in blocks.

The quotas app has no models of its own; what operators lift here lives in
Redis (:mod:`quotas.identity.blocks`). The action is added to whatever admin
the project registered for its user model, when it registered one.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest

from quotas.engine import default_engine
from quotas.exceptions import StoreUnavailable
from quotas.identity.blocks import lift, tag_for


@admin.action(description="Lift failed sign-in blocks of selected users", permissions=["change"])
def lift_sign_in_blocks(model_admin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[Any]) -> None:
    """End the username blocks of the selected users now (see ``manage.py quota_auth_blocks``)."""
    if not model_admin.has_change_permission(request):
        raise PermissionDenied
    runtime = default_engine.runtime()
    try:
        lifted = sum(lift(runtime, tag_for("username", user.get_username())) for user in queryset)
    except StoreUnavailable:
        model_admin.message_user(request, "Redis is unreachable: no block was lifted.", messages.ERROR)
        return
    model_admin.message_user(request, f"Lifted the sign-in blocks of {lifted} user(s).", messages.SUCCESS)


def add_user_action(site: admin.AdminSite = admin.site) -> None:
    """Offer :func:`lift_sign_in_blocks` on the user model's admin, if the project registered one."""
    model = get_user_model()
    if not site.is_registered(model):
        return
    user_admin = site.get_model_admin(model)
    actions = list(user_admin.actions or [])
    if lift_sign_in_blocks not in actions:
        user_admin.actions = [*actions, lift_sign_in_blocks]


add_user_action()
