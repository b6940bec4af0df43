"""The usage app's system checks (usage/checks.py): a database the flush cannot write to is reported at start-up."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import connection

from usage.checks import check_flush_database
from usage.flush import SUPPORTED_VENDORS


def test_the_session_database_passes():
    """SQLite here, PostgreSQL in CI: both are flushed to."""
    assert connection.vendor in SUPPORTED_VENDORS
    assert check_flush_database() == []


@pytest.mark.parametrize("vendor", ["postgresql", "mysql", "sqlite"])
def test_supported_vendors_pass(monkeypatch, vendor):
    """MariaDB is Django's "mysql" vendor too."""
    monkeypatch.setattr(connection, "vendor", vendor)
    assert check_flush_database() == []


def test_an_unsupported_database_is_an_error(monkeypatch):
    """Oracle (or any backend the flush has no upsert for) is usage.E001, naming it, and stops manage.py."""
    monkeypatch.setattr(connection, "vendor", "oracle")

    (error,) = check_flush_database()

    assert error.id == "usage.E001"
    assert "(oracle)" in error.msg
    assert error.hint
    with pytest.raises(SystemCheckError, match=r"usage\.E001"):
        call_command("check")
