"""The reusable apps' labels and migrations.

Each app is installed by its package name but has a ``quota_`` label, so that a
project's own ``plans`` or ``usage`` app can sit beside it (Django refuses two
apps with one label; tests/test_fresh_project.py installs ours beside such apps).
Every app with models has one linear history of named migrations, and no model
change lacks one.
"""

from __future__ import annotations

import re

import pytest
from django.apps import apps
from django.core.management import call_command
from django.db.migrations.loader import MigrationLoader

#: Package (as in INSTALLED_APPS) -> app label.
LABELS = {
    "quotas": "quotas",
    "plans": "quota_plans",
    "usage": "quota_usage",
    "adaptive": "quota_adaptive",
    "dashboard": "quota_dashboard",
    "console": "quota_console",
}
#: The labels of the apps that have models, hence migrations.
MIGRATED = ("quota_plans", "quota_usage", "quota_adaptive", "quota_console")


def test_every_app_is_installed_by_package_with_its_label():
    """INSTALLED_APPS names the packages; their labels are quota_-prefixed (quotas keeps its own)."""
    assert {c.name: c.label for c in apps.get_app_configs() if c.name in LABELS} == LABELS


@pytest.mark.django_db  # makemigrations compares the graph with the migrations applied to the database
def test_no_model_change_lacks_a_migration():
    """``makemigrations --check`` finds nothing to do for any app of the project."""
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)


def test_each_app_has_one_linear_history_of_named_migrations():
    """One leaf per app, starting at 0001_initial, each later migration named by what it does."""
    graph = MigrationLoader(None, ignore_no_migrations=True).graph
    for label in MIGRATED:
        (leaf,) = graph.leaf_nodes(label)
        history = [name for app, name in graph.forwards_plan(leaf) if app == label]
        assert history[0] == "0001_initial", history
        assert [int(name[:4]) for name in history] == list(range(1, len(history) + 1)), history
        assert not [name for name in history if re.fullmatch(r"\d{4}_auto_\d+_\d+", name)], history
