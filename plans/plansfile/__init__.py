"""Plans as code: the plans, their limits, period quotas and budgets, and the group plans, written to a YAML or
JSON file and applied from one (``manage.py quota_plans``), so that they can be kept in version control.

:func:`export_text` writes the file; :func:`apply_text` reads one, checks all of it (its structure, then every
object through its model's validation, as the admin does), and applies it in one transaction.
"""

from __future__ import annotations

from django.db import transaction

from .apply import CHANGED, CREATED, DELETED, KEPT, Change, apply_document
from .read import YAML_EXTRA, PlansFileError, Problem, read
from .schema import Document, document
from .write import export_data, export_text

FORMATS = ("yaml", "json")

__all__ = [
    "CHANGED",
    "CREATED",
    "DELETED",
    "FORMATS",
    "KEPT",
    "YAML_EXTRA",
    "Change",
    "Document",
    "PlansFileError",
    "Problem",
    "apply_text",
    "export_data",
    "export_text",
    "format_of",
    "load",
]


def format_of(path: str) -> str:
    """The format a file's name says: ``json`` for ``*.json``, else ``yaml``."""
    return "json" if path.lower().endswith(".json") else "yaml"


def load(text: str, file_format: str) -> Document:
    """A plans file's text, checked (types, unknown fields, keys given twice, references to plans).

    Raises :class:`PlansFileError` naming every problem's line, and ImportError for YAML without PyYAML."""
    return document(read(text, file_format))


def apply_text(text: str, file_format: str, *, prune: bool = False, dry_run: bool = False) -> list[Change]:
    """Apply a plans file in one transaction; returns what changed (with ``dry_run``, what would: the same
    writes are made and validated, then rolled back). Raises :class:`PlansFileError` before anything is kept."""
    checked = load(text, file_format)
    with transaction.atomic():
        changes = apply_document(checked, prune=prune)
        if dry_run:
            transaction.set_rollback(True)
    return changes
