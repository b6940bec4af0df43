"""The allow and deny list feeds' settings, read from ``QUOTAS['ACL_FEEDS']`` in Django settings.

Every key is described once in :data:`SETTINGS` (type, default, check id, hint, doc), as the adaptive and
notifications apps' are: :data:`feed_settings` reads the defaults from it, the check of ``QUOTAS`` validates
each value at start-up (the app registers :data:`SECTION`) and the settings reference's table is written from
it. Looked up on every access, so ``override_settings`` works.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from quotas.settings import SectionSettings, Setting, defaults
from quotas.settings.registry import app_section

_SECONDS = "a number of seconds"


def _absolute_directories(value: Any, label: str) -> Iterator[str]:
    for entry in value:
        if not isinstance(entry, str) or not os.path.isabs(entry):
            yield f"{label} must list absolute directory paths; {entry!r} is not one."


SETTINGS = (
    Setting(
        "INTERVAL", float, 3_600.0, exclusive_minimum=0, kind=_SECONDS, check_id="quota_plans.E011",
        doc="seconds between two refreshes of every enabled feed; use it as the beat schedule of "
        "`plans.refresh_acl_feeds` (check `quota_plans.W011`)",
        hint="An hour suits most threat-intelligence feeds; their publishers ask for no more than that.",
    ),
    Setting(
        "TIMEOUT", float, 10.0, exclusive_minimum=0, maximum=120, kind=_SECONDS, check_id="quota_plans.E011",
        doc="seconds a feed URL's whole request may take, from resolving its host to the answer's last byte (and "
        "how long its host may take to resolve when the feed is saved)",
        hint="10 s is generous for a list of addresses.",
    ),
    Setting(
        "MAX_BYTES", int, 8_388_608, minimum=1, check_id="quota_plans.E012",
        doc="the largest feed read, in bytes (URL or file); a larger one fails and its last good list stays",
        hint="8 MiB holds some 200,000 IPv6 networks; raise it for a larger feed.",
    ),
    Setting(
        "ALLOW_HTTP", bool, False, check_id="quota_plans.E013",
        doc="`True` admits `http://` feed URLs; off, only `https://` (an allow list read in clear could be "
        "changed on the way to lift every limit)",
        hint="Leave it False in production, or serve the feed over https://.",
    ),
    Setting(
        "ALLOW_PRIVATE_ADDRESSES", bool, False, check_id="quota_plans.E013",
        doc="`True` lets feed URLs reach internal addresses, for tests or an internal feed server (every block of "
        "IANA's special-purpose registries that is not globally reachable, as for webhooks' "
        "`ALLOW_PRIVATE_ADDRESSES`, and such IPv4 addresses in NAT64, 6to4, Teredo or IPv4-compatible form); off, "
        "such a URL is refused when the feed is saved and again when it is fetched (SSRF)",
        hint="Leave it False in production: whoever may edit feeds could otherwise probe your internal services.",
    ),
    Setting(
        "MAX_ALLOW_SHARE", float, 2**-16, minimum=0, maximum=1, kind="a share from 0 to 1",
        check_id="quota_plans.E015",
        doc="the largest share of the public addresses of each IP version (every IPv4 address; IPv6's global "
        "unicast `2000::/3`) that every enabled allow feed and the admin's allow entries for networks may cover "
        "together, overlaps counted once and non-global blocks (private, loopback, ULA, documentation...) not at "
        "all; a refresh or an entry that would pass it is refused. Default 1/65536: 65,536 IPv4 addresses (a "
        "/16), or a /19 of IPv6",
        hint="Far above any list of crawlers, monitors or partners, far below a cloud provider's ranges (allowing "
        "those lifts every limit for whoever rents a machine there); raise it only for a list you know.",
    ),
    Setting(
        "FILE_DIRECTORIES", list | tuple, (), validate=_absolute_directories, check_id="quota_plans.E014",
        doc="absolute directories local feed files may be read from; a feed's file must lie inside one "
        "(empty: no file feeds)",
        hint="e.g. ['/etc/quota-feeds']: otherwise whoever may edit feeds could make the server read any file.",
    ),
)  # fmt: skip

DEFAULTS: dict[str, Any] = defaults(SETTINGS)


#: ``QUOTAS['ACL_FEEDS']`` itself, registered by :meth:`plans.apps.PlansConfig.ready`: checked with ``QUOTAS``
#: (quotas/settings/checking.py), and a table of the settings reference.
SECTION = app_section(
    "plans", SETTINGS, "ACL_FEEDS", check_id="quota_plans.E010", unknown_id="quota_plans.W010",
    doc="allow and deny lists kept from feeds (URLs or files), read by the `plans` app (its keys below)",
)  # fmt: skip

#: ``QUOTAS['ACL_FEEDS']``, key by key, with :data:`DEFAULTS` filled in.
feed_settings = SectionSettings("ACL_FEEDS", SETTINGS)
