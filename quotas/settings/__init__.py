"""The platform's settings: the ``QUOTAS`` dict in Django settings, described as data and checked at start-up.

:mod:`~quotas.settings.registry` holds the sections other apps own and register from their ``ready()``;
:mod:`~quotas.settings.checking` checks ``QUOTAS`` against every description.
"""
