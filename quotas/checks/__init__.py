"""System checks for ``settings.QUOTAS`` (ids quotas.E0xx / quotas.W0xx), registered when this package is imported
(``QuotasConfig.ready``).

Every setting, the engine's and those of each installed app's section, is checked against its description by
one loop (:mod:`quotas.settings.checking`, run by :func:`~quotas.checks.engine.check_settings`); the checks of
:mod:`~quotas.checks.engine`, :mod:`~quotas.checks.store` and :mod:`~quotas.checks.front_doors` compare QUOTAS
with the store's URL, DRF's settings, MIDDLEWARE and the database. None of them opens a connection: they run at
every manage.py start. :mod:`~quotas.checks.required_apps` is what the platform's other apps check with.
"""

from quotas.checks import front_doors, store
from quotas.checks.engine import check_settings
from quotas.checks.required_apps import missing_apps, raise_missing_apps

__all__ = ["check_settings", "front_doors", "missing_apps", "raise_missing_apps", "store"]
