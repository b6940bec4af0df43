"""The check of ``settings.QUOTAS`` against its descriptions: the engine's settings and every app's section.

One loop (:func:`check_dict`) checks a settings dict against the :class:`~quotas.settings.setting.Setting` tuple that
describes it; :func:`check_quotas` runs it over the engine's settings and the section of every installed app
that registered one (:mod:`quotas.settings.registry`). ``quotas.checks.check_settings`` is the system check
that calls it. Nothing here opens a connection.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from typing import Any

from django.core.checks import CheckMessage, Error, Warning

from .registry import absent_sections, installed_sections
from .setting import Setting
from .spec import SETTINGS


def unknown_settings(namespace: str, raw: dict, known: Iterable[str], check_id: str) -> list[CheckMessage]:
    """A warning, with a "did you mean", for each key of a settings dict that is not a known setting."""
    known = list(known)
    warnings: list[CheckMessage] = []
    for name in raw:
        if name not in known:
            close = difflib.get_close_matches(str(name), known, n=1)
            hint = f"Did you mean {close[0]!r}?" if close else f"Known settings: {', '.join(sorted(known))}."
            warnings.append(Warning(f"Unknown setting {namespace}[{name!r}] is ignored.", hint=hint, id=check_id))
    return warnings


def check_dict(
    label: str, raw: dict, described: Sequence[Setting], unknown_id: str, unknown_ids: dict[str, str] | None = None
) -> list[CheckMessage]:
    """``raw`` (a settings dict named ``label``, such as ``QUOTAS``) checked against its description.

    A key not described is a warning ``unknown_id`` with a "did you mean"; every described setting's
    value (its default when the key is absent) is checked with the setting's own id and hint, and a
    section's dict key by key the same way, its unknown keys reported as ``unknown_ids[section]`` when given
    (an app's section has warnings of its own), else as ``unknown_id``.
    """
    messages = unknown_settings(label, raw, [s.name for s in described], unknown_id)
    for setting in described:
        where = f"{label}[{setting.name!r}]"
        value = raw.get(setting.name, setting.default)
        messages += setting.check(value, where)
        if setting.keys and isinstance(value, dict):
            messages += check_dict(where, value, setting.keys, (unknown_ids or {}).get(setting.name, unknown_id))
    return messages


def check_quotas(raw: Any) -> list[CheckMessage]:
    """What is wrong with ``raw`` as ``settings.QUOTAS``: each problem with its setting's id and hint.

    The engine's settings and the sections of the installed apps are checked alike; a section whose app is not
    installed is not checked but reported (quotas.W008), since nothing reads it.
    """
    if not isinstance(raw, dict):
        return [Error("QUOTAS must be a dict.", hint="Set QUOTAS = {...} in your settings.", id="quotas.E001")]
    sections = installed_sections()
    absent = absent_sections()
    described = [*SETTINGS, *(s.setting for s in sections.values())]
    unknown_ids = {name: s.unknown_id for name, s in sections.items()}
    present = {name: value for name, value in raw.items() if name not in absent}
    return check_dict("QUOTAS", present, described, "quotas.W001", unknown_ids) + [
        not_installed(name, absent[name]) for name in raw if name in absent
    ]


def not_installed(name: str, app: str) -> CheckMessage:
    """quotas.W008: ``QUOTAS[name]`` is set and ``app``, which reads it, is not installed."""
    return Warning(
        f"QUOTAS[{name!r}] is set, but the {app!r} app that reads it is not in INSTALLED_APPS: it is ignored.",
        hint=f"Add {app!r} to INSTALLED_APPS, or remove QUOTAS[{name!r}].",
        id="quotas.W008",
    )
