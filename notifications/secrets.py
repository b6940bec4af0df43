"""Endpoint secrets: made here, shown once, stored encrypted (they must be read back to sign each body).

Encrypted with Fernet (the ``cryptography`` package: AES-128-CBC with an HMAC-SHA256, authenticated) under a
key derived from Django's ``SECRET_KEY``; the keys of ``SECRET_KEY_FALLBACKS`` still decrypt, so rotating
``SECRET_KEY`` the way Django documents keeps every endpoint working. Never logged.
"""

from __future__ import annotations

import base64
import hashlib
import secrets

from cryptography.fernet import Fernet, MultiFernet
from django.conf import settings

#: Marks a webhook secret in a receiver's configuration, as API keys carry their own prefix.
PREFIX = "whsec_"


def new_secret() -> str:
    """A new signing secret: 32 random bytes, URL-safe."""
    return PREFIX + secrets.token_urlsafe(32)


def _fernet(key: str | bytes) -> Fernet:
    # A purpose of its own, so the derived key is not SECRET_KEY's hash used anywhere else.
    raw = key.encode() if isinstance(key, str) else key
    digest = hashlib.sha256(b"quota-platform webhook secrets\0" + raw).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def _keys() -> MultiFernet:
    return MultiFernet([_fernet(settings.SECRET_KEY), *(_fernet(k) for k in settings.SECRET_KEY_FALLBACKS)])


def encrypt(secret: str) -> str:
    """``secret`` encrypted under the current ``SECRET_KEY``."""
    return _keys().encrypt(secret.encode()).decode()


def decrypt(token: str) -> str:
    """The secret of ``token``; raises :class:`cryptography.fernet.InvalidToken` when no key of
    ``SECRET_KEY`` and ``SECRET_KEY_FALLBACKS`` made it."""
    return _keys().decrypt(token.encode()).decode()
