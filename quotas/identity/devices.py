"""Trusted devices: a browser that signed in as a user keeps signing in while that username is under attack.

The OWASP "device cookie" design. After a successful sign-in (Django's
``user_logged_in``: the admin login, any view calling ``login()``), the
browser gets a cookie signed with ``SECRET_KEY`` that names a random device id
and the users (hashed) who signed in from it. A wrong password sent with that
cookie counts against the device's own limit; without it, against the client
address and the username (:mod:`quotas.identity.auth_failures`). So a guesser
who spends a username's limit keeps new browsers out for the rest of the
window, never the owner's.

The cookie holds no secret of the user and grants nothing by itself: the
password is still checked. Clients that keep no cookies (HTTP Basic from a
script) are treated as new browsers; they should use API keys.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core import signing
from django.http import HttpRequest, HttpResponse

COOKIE_NAME = "quota_device"
#: A device stays trusted this long after its last sign-in (each sign-in renews it).
MAX_AGE = timedelta(days=180)
#: Users one browser is remembered for, the most recent first.
MAX_USERS = 5
_SALT = "quotas.trusted-device"
#: Characters of a cookie value read at most: a signed id and MAX_USERS digests fit well within it.
_COOKIE_MAX = 1024
#: Where remember_sign_in() leaves the cookie for the middleware: a key of the request's META (see there).
_PENDING = "quotas.device_cookie"


def username_digest(username: object) -> str:
    """How a username is named in the cookie and in Redis: hashed, since usernames are personal data."""
    return hashlib.sha256(str(username).strip().casefold().encode()).hexdigest()[:24]


def _read(request: HttpRequest) -> tuple[str, list[str]] | None:
    """The device id and user digests of ``request``'s cookie, or None (absent, forged, too old, malformed)."""
    raw = request.COOKIES.get(COOKIE_NAME)
    if not raw or len(raw) > _COOKIE_MAX:
        return None
    try:
        value = signing.loads(raw, salt=_SALT, max_age=MAX_AGE)
    except signing.BadSignature:
        return None
    if not isinstance(value, dict):
        return None
    device, users = value.get("d"), value.get("u")
    if not isinstance(device, str) or not isinstance(users, list) or not all(isinstance(u, str) for u in users):
        return None
    return device, users


def trusted_device(request: HttpRequest, username: object) -> str | None:
    """The id of ``request``'s device if ``username`` signed in from it before, else None."""
    found = _read(request)
    if found is None:
        return None
    device, users = found
    return device if username_digest(username) in users else None


def remember_sign_in(request: HttpRequest, username: object) -> None:
    """Trust ``request``'s browser for ``username`` from now on (the cookie is set on the response)."""
    device, users = _read(request) or (secrets.token_urlsafe(16), [])
    digest = username_digest(username)
    users = [digest, *(u for u in users if u != digest)][:MAX_USERS]
    # In META, which DRF's request reads from Django's: the middleware, given Django's, finds it.
    request.META[_PENDING] = signing.dumps({"d": device, "u": users}, salt=_SALT)


def on_logged_in(sender: Any, request: Any = None, user: Any = None, **kwargs: Any) -> None:
    """``user_logged_in`` receiver: the browser that just signed in becomes trusted for that user."""
    if request is None or user is None:
        return
    remember_sign_in(request, user.get_username())


def set_cookie(request: HttpRequest, response: HttpResponse) -> None:
    """Set the cookie :func:`remember_sign_in` prepared for ``request``, if any (called by the middleware)."""
    value = request.META.get(_PENDING)
    if value is None:
        return
    response.set_cookie(
        COOKIE_NAME,
        value,
        max_age=int(MAX_AGE.total_seconds()),
        httponly=True,
        secure=request.is_secure() or bool(settings.SESSION_COOKIE_SECURE),
        samesite="Lax",
    )
