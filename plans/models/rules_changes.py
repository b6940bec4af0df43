"""The rules' change counter in the database: one row, moved on by every committed change the rules are built from.

Redis holds the rules version every process polls (:mod:`quotas.store.rules_version`). This row is its twin in
the database, where keys and plans live: each process's poller reads it, about once a second, only while the
version in Redis is unreadable, so a change committed meanwhile (a revoked key) reaches every process within a
couple of seconds even then. No request reads it.
"""

from __future__ import annotations

from django.db import models
from django.db.models import F

#: The primary key of the one row.
ROW = 1


class RulesChange(models.Model):
    """How many rules changes were committed (the one row, created by the first)."""

    changes = models.BigIntegerField(default=0)

    class Meta:
        verbose_name = "rules change counter"

    def __str__(self) -> str:
        return f"{self.changes} rules changes"

    @classmethod
    def count(cls) -> int:
        """The changes committed so far (0 before the first)."""
        return cls.objects.filter(pk=ROW).values_list("changes", flat=True).first() or 0

    @classmethod
    def bump(cls) -> None:
        """Count one more change: one ``UPDATE``, atomic in the database (two processes' bumps both count)."""
        if not cls.objects.filter(pk=ROW).update(changes=F("changes") + 1):
            _, created = cls.objects.get_or_create(pk=ROW, defaults={"changes": 1})
            if not created:  # another process created it meanwhile: its change and this one
                cls.objects.filter(pk=ROW).update(changes=F("changes") + 1)
