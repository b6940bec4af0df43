"""The platform's settings: everything lives in the ``QUOTAS`` dict in Django settings.

Read through :data:`quota_settings`; an attribute is looked up in
``settings.QUOTAS`` on first access and kept until Django's
``setting_changed`` signal says ``QUOTAS`` changed (as DRF's ``api_settings``
does, so ``override_settings`` works and nothing is captured at import time),
falling back to the defaults of
:data:`quotas.settings.spec.SETTINGS`, where every setting is described once
(type, default, allowed values, check id, hint, doc). A concern with several
settings is a nested dict (:data:`SECTIONS`): ``QUOTAS['METRICS']``,
``QUOTAS['USAGE_FLUSH']``, ... A project's nested dict is merged over the
section's defaults key by key. The sections other apps read
(``QUOTAS['ADAPTIVE']``, ...) are theirs: each app describes its keys and reads
them with a :class:`quotas.settings.setting.SectionSettings` of its own, and registers
the section (:mod:`quotas.settings.registry`) so that it is checked.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed

from .setting import defaults
from .spec import SETTINGS
from .validators import ALGORITHMS as ALGORITHMS

#: Every setting's default, by name (derived from :data:`SETTINGS`; a section's is the dict of its keys').
DEFAULTS: dict[str, Any] = defaults(SETTINGS)

#: Settings that are nested dicts of their own keys, merged over their defaults key by key.
SECTIONS = tuple(s.name for s in SETTINGS if s.keys)


class QuotaSettings:
    """Attribute access to ``settings.QUOTAS`` with :data:`DEFAULTS` filled in.

    ``quotas`` stands in for ``settings.QUOTAS`` (a second :class:`~quotas.engine.Engine` on another store, say:
    ``Engine(settings=QuotaSettings({**settings.QUOTAS, "KEY_PREFIX": "other"}))``).

    A section (``quota_settings.METRICS``) is a new dict on every access: its
    defaults, then the project's ``QUOTAS[section]``. A section that is not a
    dict reads as its defaults (system check quotas.E034 reports it). Other
    values are kept once read (several are read on every request), until
    :meth:`reload`.
    """

    def __init__(self, quotas: dict[str, Any] | None = None) -> None:
        self._quotas = quotas

    def __getattr__(self, name: str) -> Any:
        if name not in DEFAULTS:
            raise AttributeError(f"Invalid QUOTAS setting: {name!r}")
        user = self.user_settings()
        if not isinstance(user, dict):
            user = {}
        if name not in SECTIONS:
            value = user.get(name, DEFAULTS[name])
            # Found in the instance's __dict__ from now on: __getattr__ is not called again until reload().
            # A request reads four or five settings: with the header texts made once per window, keeping them
            # saves about 5 us of a busy client's 37 (docs/benchmark-history.md).
            setattr(self, name, value)
            return value
        given = user.get(name)
        values = dict(DEFAULTS[name])
        if isinstance(given, dict):
            values.update(given)
        return values

    @cached_property
    def api_key_meta(self) -> str:
        """The WSGI ``META`` name of ``API_KEY_HEADER`` (``X-API-Key`` -> ``HTTP_X_API_KEY``), read on every
        request: made once, until :meth:`reload`."""
        return "HTTP_" + self.API_KEY_HEADER.upper().replace("-", "_")

    def reload(self) -> None:
        """Forget the values read so far (``QUOTAS`` changed): the next read of each calls __getattr__ again."""
        for name in [n for n in vars(self) if n in DEFAULTS or n == "api_key_meta"]:
            delattr(self, name)

    def user_settings(self) -> Any:
        """The raw ``QUOTAS`` value from Django settings (for checks), or the one given; ``{}`` when unset."""
        value = self._quotas if self._quotas is not None else getattr(settings, "QUOTAS", None)
        return value if value is not None else {}


quota_settings = QuotaSettings()


def _reload(*, setting: str, **kwargs: object) -> None:
    if setting == "QUOTAS":
        quota_settings.reload()


setting_changed.connect(_reload, weak=False, dispatch_uid="quotas-conf-reload")
