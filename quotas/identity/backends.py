"""Authentication backends of the quotas app (only with ``django.contrib.auth`` installed)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.backends import BaseBackend, ModelBackend
from django.core.exceptions import PermissionDenied

from quotas.identity.auth_failures import address_tag, failed_auth, refuse, username_tag


class FailedAuthBackend(BaseBackend):
    """An authentication backend that only refuses: put it first in ``AUTHENTICATION_BACKENDS``.

    For an address or username over its limit it raises PermissionDenied,
    which stops Django's ``authenticate()`` before any other backend hashes a
    password; otherwise it lets the next backend decide. It grants no
    permission. ``get_user`` is ModelBackend's: Django (``force_login``, a
    login without a backend) names the first backend in the session.
    """

    def authenticate(self, request: Any, username: str | None = None, **credentials: Any) -> None:
        if request is None:
            return None
        # Asks Redis unless this process already knows (a block learnt by another process counts too).
        wait = failed_auth.check(address_tag(request), username_tag(username))
        if wait:
            refuse(request, wait)
            raise PermissionDenied(f"too many failed sign-ins; retry in {wait} s")
        return None

    def get_user(self, user_id: Any) -> Any:
        return ModelBackend().get_user(user_id)
