"""The sections of ``QUOTAS`` that other apps own, registered by each app from its ``AppConfig.ready()``.

The engine describes its own settings (:data:`quotas.settings.spec.SETTINGS`); a nested dict read by another
app (``QUOTAS['ADAPTIVE']``, ``QUOTAS['NOTIFICATIONS']``, ``QUOTAS['ACL_FEEDS']``) is described by that app,
next to the object that reads it (``adaptive/conf.py``, ...), and registered here when Django starts, as
django-cors-headers and django-axes keep their settings in their own app. The system check of ``QUOTAS``
(:func:`quotas.settings.checking.check_quotas`) validates every registered section of an installed app, and
the settings reference (``python -m config.settings_docs``) writes a table for each.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.apps import apps

from .setting import Setting

#: Which app reads each section of the platform's other apps, by the name it has in INSTALLED_APPS. Only the
#: names: the keys, defaults and checks are the app's own. Kept here so that a project setting a section without
#: installing its app is told which app to install (quotas.W008) rather than that the setting is unknown.
SECTION_APPS = {"ADAPTIVE": "adaptive", "NOTIFICATIONS": "notifications", "ACL_FEEDS": "plans", "CONSOLE": "console"}


@dataclass(frozen=True)
class AppSection:
    """A nested dict of ``QUOTAS`` that ``app`` reads and describes.

    ``setting`` describes the dict itself (its type, the id of the error when it is not a dict, its line in the
    reference) with its keys in ``setting.keys``; ``unknown_id`` is the warning for a key it does not describe.
    """

    app: str
    setting: Setting
    unknown_id: str

    @property
    def name(self) -> str:
        """The key in ``QUOTAS``, e.g. ``'ADAPTIVE'``."""
        return self.setting.name

    def installed(self) -> bool:
        """Whether the app that reads this section is in INSTALLED_APPS (now: ``override_settings`` may change it)."""
        return apps.is_installed(self.app)


def app_section(
    app: str, keys: tuple[Setting, ...], name: str, *, doc: str, check_id: str, unknown_id: str
) -> AppSection:
    """``QUOTAS[name]``, read by ``app``: a dict of ``keys``, or None (None or left out, it reads as their defaults).

    ``check_id`` is the error when it is something else, ``unknown_id`` the warning for a key not in ``keys``.
    """
    hint = "A dict of the keys to change, or leave it out."
    return AppSection(app, Setting(name, dict | None, {}, doc, check_id, hint, keys=keys), unknown_id)


_registered: dict[str, AppSection] = {}


def register(section: AppSection) -> None:
    """Make ``section`` part of ``QUOTAS``: checked at start-up, listed in the reference. Called from the
    ``ready()`` of the app that reads it; registering the same section again (Django may run ``ready()`` twice in
    tests) changes nothing, and two apps claiming one name is a programming error."""
    known = _registered.get(section.name)
    if known is not None and known.app != section.app:
        raise ValueError(f"QUOTAS[{section.name!r}] is registered by {known.app!r} already, not {section.app!r}.")
    _registered[section.name] = section


def registered() -> list[AppSection]:
    """Every registered section, in the order the apps registered them (their order in INSTALLED_APPS)."""
    return list(_registered.values())


def installed_sections() -> dict[str, AppSection]:
    """The registered sections whose app is installed, by name: those a project's ``QUOTAS`` may hold."""
    return {s.name: s for s in _registered.values() if s.installed()}


def absent_sections() -> dict[str, str]:
    """The sections no installed app reads, by name, with the app that would: set in ``QUOTAS``, each is W008."""
    absent = {name: app for name, app in SECTION_APPS.items() if not apps.is_installed(app)}
    absent.update({s.name: s.app for s in _registered.values() if not s.installed()})
    return absent
