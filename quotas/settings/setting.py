"""One setting described as data: its type, default, allowed values, check id, hint and doc.

A settings dict (``QUOTAS``, ``QUOTAS['ADAPTIVE']``) is described once, as a
tuple of :class:`Setting` (``quotas.settings.spec.SETTINGS``,
``adaptive.conf.SETTINGS``). The settings object reads its defaults from it,
one system-check loop validates it (:func:`quotas.checks.check_dict`), and
:func:`markdown_table` writes the settings reference's table from it, so the three cannot
disagree.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from os import PathLike
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error

#: A check beyond type and range. It gets a value of the described type (that is checked first) and the setting's
#: name as messages write it (``QUOTAS['PATH_LIMITS']``), and returns what is wrong: a message string, reported with
#: the setting's own id and hint, or a ready message with an id of its own (a warning, a cross-setting error).
Validator = Callable[[Any, str], Iterable[str | CheckMessage]]

_TYPE_WORDS = {
    bool: "True or False",
    int: "an int",
    float: "a number",
    str: "a string",
    list: "a list",
    tuple: "a tuple",
    dict: "a dict",
    Decimal: "a Decimal",
    PathLike: "a path",
    type(None): "None",
}


@dataclass(frozen=True)
class Setting:
    """One key of a settings dict.

    ``type`` is a class or a union (``str | None``); ``float`` admits ints,
    and ``True``/``False`` are never numbers. The bounds are inclusive
    (``minimum``, ``maximum``) or exclusive (``exclusive_minimum``,
    ``exclusive_maximum``), as JSON Schema names them. A setting with
    ``keys`` is a section: a dict of those keys, merged over their defaults.
    """

    name: str
    type: Any
    default: Any
    doc: str
    check_id: str
    hint: str
    choices: tuple[Any, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: float | None = None
    exclusive_maximum: float | None = None
    #: What the value is, in words, where the type's own name says too little ("a number of seconds").
    kind: str = ""
    validate: Validator | None = None
    keys: tuple[Setting, ...] = ()
    #: Never repeated in a message (a token, a URL that may hold a password).
    secret: bool = False

    def check(self, value: Any, label: str) -> list[CheckMessage]:
        """What is wrong with ``value`` as this setting, named ``label`` in messages; ``[]`` when nothing."""
        if not self.admits(value):
            shown = "" if self.secret else f" = {value!r}"
            return [Error(f"{label}{shown} must be {self.expected()}.", hint=self.full_hint(), id=self.check_id)]
        if self.validate is None:
            return []
        return [
            found if isinstance(found, CheckMessage) else Error(found, hint=self.full_hint(), id=self.check_id)
            for found in self.validate(value, label)
        ]

    def admits(self, value: Any) -> bool:
        """Whether ``value`` has the described type and lies within the choices or bounds."""
        if self.choices is not None:
            return value in self.choices
        types = self.types()
        if isinstance(value, bool):
            return bool in types
        if not isinstance(value, (*types, int) if float in types else types):
            return False
        if value is None or not isinstance(value, int | float):
            return True
        # Written as "not (value >= bound)" so that NaN is out of every range.
        low, high = self.minimum, self.maximum
        low_open, high_open = self.exclusive_minimum, self.exclusive_maximum
        return not (
            (low is not None and not value >= low)
            or (high is not None and not value <= high)
            or (low_open is not None and not value > low_open)
            or (high_open is not None and not value < high_open)
        )

    def types(self) -> tuple[Any, ...]:
        """The classes ``type`` names (a union's members)."""
        return typing.get_args(self.type) or (self.type,)

    def expected(self) -> str:
        """What the value must be, in words: "an int from 1 to 128", "one of: local, open, closed"."""
        if self.choices is not None:
            return f"one of: {', '.join(map(str, self.choices))}"
        kind = self.kind or " or ".join(_TYPE_WORDS.get(t, t.__name__) for t in self.types())
        return f"{kind} {self.bounds()}".strip()

    def bounds(self) -> str:
        """The allowed range in words: "from 1 to 128", "in (0, 1]", ">= 0", or "" for none."""
        low = self.minimum if self.minimum is not None else self.exclusive_minimum
        high = self.maximum if self.maximum is not None else self.exclusive_maximum
        if low is not None and high is not None:
            if self.minimum is not None and self.maximum is not None:
                return f"from {_number(low)} to {_number(high)}"
            opening = "[" if self.minimum is not None else "("
            closing = "]" if self.maximum is not None else ")"
            return f"in {opening}{_number(low)}, {_number(high)}{closing}"
        if low is not None:
            return f"{'>=' if self.minimum is not None else '>'} {_number(low)}"
        if high is not None:
            return f"{'<=' if self.maximum is not None else '<'} {_number(high)}"
        return ""

    def full_hint(self) -> str:
        """The check's hint: how to fix the value, then the default."""
        return f"{self.hint} Default: {self.default!r}."


#: From this size on, bounds are written with digit groups.
_GROUPED_FROM = 10_000


def _number(bound: float) -> str:
    """A bound as a reader takes it in: 16_777_216 rather than 16777216."""
    return f"{bound:_}" if isinstance(bound, int) and bound >= _GROUPED_FROM else str(bound)


def section(name: str, keys: tuple[Setting, ...], doc: str, check_id: str, hint: str) -> Setting:
    """A setting that is a dict of ``keys``, merged over their defaults (None reads as the defaults)."""
    return Setting(name, dict | None, defaults(keys), doc, check_id, hint, keys=keys)


def defaults(settings: Iterable[Setting]) -> dict[str, Any]:
    """Each setting's default by name."""
    return {s.name: s.default for s in settings}


def markdown_table(settings: Sequence[Setting], first: str = "setting") -> str:
    """The documentation's table of ``settings``: name, default, meaning and the check id, one row each."""
    rows = [f"| {first} | default | meaning | check |", "|---|---|---|---|"]
    for s in settings:
        default = "see below" if s.keys else f"`{s.default!r}`"
        cells = [f"`{s.name}`", default, s.doc, f"`{s.check_id}`"]
        rows.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(rows) + "\n"


class SectionSettings:
    """Attribute access to the dict ``settings.QUOTAS[section]`` with the defaults of ``described`` filled in.

    Looked up on every access, so ``override_settings`` works and nothing is captured at import time. A key
    given there replaces its default as a whole (a dict-valued key too).
    """

    def __init__(self, section: str, described: Iterable[Setting]) -> None:
        self._section = section
        self._defaults = defaults(described)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in self._defaults:
            raise AttributeError(f"Invalid QUOTAS[{self._section!r}] setting: {name!r}")
        user = self.user_settings()
        return user.get(name, self._defaults[name]) if isinstance(user, dict) else self._defaults[name]

    def user_settings(self) -> Any:
        """The project's section, raw (for checks): ``QUOTAS[section]``, else ``{}``."""
        quotas = getattr(settings, "QUOTAS", None)
        value = quotas.get(self._section) if isinstance(quotas, dict) else None
        return value if value is not None else {}
