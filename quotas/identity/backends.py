"""Authentication backends of the quotas app (only with ``django.contrib.auth`` installed)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.backends import BaseBackend, ModelBackend
from django.core.exceptions import PermissionDenied

from quotas.identity.auth_failures import failed_auth, password_tags, refuse


class FailedAuthBackend(BaseBackend):
    """An authentication backend that only refuses: put it first in ``AUTHENTICATION_BACKENDS``.

    For an attempt over its limits (:func:`~quotas.identity.auth_failures.password_tags`)
    it raises PermissionDenied, which stops Django's ``authenticate()`` before any other backend hashes a
    password; otherwise it lets the next backend decide. It grants no
    permission. ``get_user`` is ModelBackend's: Django (``force_login``, a
    login without a backend) names the first backend in the session.
    """

    def authenticate(self, request: Any, username: str | None = None, **credentials: Any) -> None:
        if request is None:
            return None
        # Asks Redis unless this process already knows (a block learnt by another process counts too).
        # A browser that signed in as ``username`` before is held to its own limit only.
        wait = failed_auth.check(*password_tags(request, username))
        if wait:
            refuse(request, wait)
            raise PermissionDenied(f"too many failed sign-ins; retry in {wait} s")
        return None

    def get_user(self, user_id: Any) -> Any:
        return ModelBackend().get_user(user_id)
