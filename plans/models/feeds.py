"""Allow and deny lists kept from feeds (URLs or files), refreshed by the ``plans.refresh_acl_feeds`` task, and
what a feed's source may be: the rule :meth:`ACLFeed.clean` applies when a feed is saved and ``plans.feeds.source``
again before each read (the feeds package builds on this module, never the other way round)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

from django.core.exceptions import ValidationError
from django.db import models

from quotas.formats.acl import IPNetwork, covers_everyone, parse_network
from quotas.outbound import Refused, check_url

from ..conf import feed_settings
from .access import ACLEntry


class ACLFeed(models.Model):
    """A list of IP addresses and networks to allow or deny, read from a URL or a file on a schedule.

    Its last good list is kept on the row as text, one normalised network a line (``entries``), rather than
    as one row per network: the list is only ever replaced whole and read whole (to build the rules
    snapshot), so one UPDATE swaps it atomically, a refresh of 100,000 networks writes one row instead of
    deleting and inserting 100,000, and a failed or malformed fetch simply leaves the text as it was.
    Nobody edits a feed's networks one by one: the feed is their source.
    """

    name = models.SlugField(
        max_length=64, unique=True, help_text="Names the feed in metrics, logs and the deny refusal's detail."
    )
    source = models.CharField(
        max_length=500,
        help_text="An https:// URL, or the absolute path of a file inside QUOTAS['ACL_FEEDS']['FILE_DIRECTORIES']. "
        "One IP address or CIDR network a line; '#' starts a comment.",
    )
    action = models.CharField(max_length=8, choices=ACLEntry.Action.choices)
    enabled = models.BooleanField(default=True, help_text="Off: the feed is neither fetched nor applied.")
    entries = models.TextField(blank=True, editable=False, help_text="The last good list, one network a line.")
    entry_count = models.PositiveIntegerField(default=0, editable=False)
    fetched_at = models.DateTimeField(null=True, blank=True, editable=False, help_text="The last good fetch.")
    last_error = models.TextField(blank=True, editable=False, help_text="Why the last fetch failed.")
    last_error_at = models.DateTimeField(null=True, blank=True, editable=False)
    consecutive_failures = models.PositiveIntegerField(default=0, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "access list feed"
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.action} feed {self.name}"

    @property
    def is_failing(self) -> bool:
        """Whether the last fetch failed (the last good list, if any, is still applied)."""
        return self.consecutive_failures > 0

    def networks(self) -> list[str]:
        """The last good list, one network per item."""
        return self.entries.split()

    def clean(self) -> None:
        self.source = self.source.strip()
        try:
            check_source(self.source)
        except FeedError as exc:
            raise ValidationError({"source": str(exc)}) from exc
        # A deny feed may list every address; turned into an allow feed, that list would lift every limit.
        covered = self.action == ACLEntry.Action.ALLOW and covers_everyone(_parsed(self.networks()))
        if covered:
            lifted = f"This feed's list covers {covered}: allowing it would lift every limit for every client."
            raise ValidationError({"action": lifted})


def _parsed(networks: Iterable[str]) -> Iterator[IPNetwork]:
    """The networks of a stored list that parse (the refresh stores none that do not)."""
    for text in networks:
        try:
            yield parse_network(text)
        except ValueError:
            continue


class FeedError(Exception):
    """A feed that could not be read or parsed; the message says why, in words an operator can act on."""


def is_url(source: str) -> bool:
    """Whether ``source`` names a URL (else it is a file path)."""
    return source.startswith(("http://", "https://"))


def check_source(source: str) -> None:
    """Raise :class:`FeedError` unless ``source`` is a URL or file the settings allow reading (nothing is read)."""
    if is_url(source):
        try:
            check_url(
                source,
                allow_http=bool(feed_settings.ALLOW_HTTP),
                allow_private=bool(feed_settings.ALLOW_PRIVATE_ADDRESSES),
                timeout=float(feed_settings.TIMEOUT),
            )
        except Refused as exc:
            raise FeedError(f"not fetched: {exc}") from exc
        except TimeoutError as exc:
            raise FeedError(f"not checked: {exc}; try again later") from exc
        return
    allowed_path(source)


def allowed_path(path: str) -> str:
    """``path`` resolved, once it lies inside one of ``FILE_DIRECTORIES`` (symbolic links followed first); raises
    :class:`FeedError` otherwise."""
    if not os.path.isabs(path):
        raise FeedError("a feed's source is an https:// URL or an absolute file path")
    real = os.path.realpath(path)
    for directory in feed_settings.FILE_DIRECTORIES:
        root = os.path.realpath(directory)
        if os.path.commonpath([root, real]) == root:
            return real
    raise FeedError(f"{path} is not inside a directory of QUOTAS['ACL_FEEDS']['FILE_DIRECTORIES'], so it is not read")
