"""The platform's settings: the ``QUOTAS`` dict in Django settings, described as data and checked at start-up.

Read the engine's settings through :data:`quota_settings` (``from quotas.settings import quota_settings``), as
DRF's are read through ``api_settings``. The modules, bottom up: :mod:`~quotas.settings.setting` (one setting
described as data, and :class:`SectionSettings`, the reader of an app's section), :mod:`~quotas.settings.validators`
(checks beyond a type and a range), :mod:`~quotas.settings.spec` (every setting of the engine),
:mod:`~quotas.settings.conf` (the settings object), :mod:`~quotas.settings.registry` (the sections other apps own
and register from their ``ready()``) and :mod:`~quotas.settings.checking` (``QUOTAS`` checked against every
description). Modules of this package import one another by module path, never through this one.
"""

from .conf import ALGORITHMS, DEFAULTS, SECTIONS, QuotaSettings, quota_settings
from .setting import SectionSettings, Setting, Validator, defaults, markdown_table, section

__all__ = [
    "ALGORITHMS",
    "DEFAULTS",
    "SECTIONS",
    "QuotaSettings",
    "SectionSettings",
    "Setting",
    "Validator",
    "defaults",
    "markdown_table",
    "quota_settings",
    "section",
]
