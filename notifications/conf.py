"""The notifications' settings, read from ``QUOTAS['NOTIFICATIONS']`` in Django settings.

Every key is described once in :data:`SETTINGS` (type, default, check id, hint, doc), as the adaptive app's are:
:data:`notification_settings` reads the defaults from it, the check of ``QUOTAS`` validates each value at
start-up (the app registers :data:`SECTION`) and the settings reference's table is written from it. Looked up on
every access, so ``override_settings`` works.
"""

from __future__ import annotations

from typing import Any

from quotas.settings import SectionSettings, Setting, defaults
from quotas.settings.registry import app_section

_SECONDS = "a number of seconds"

SETTINGS = (
    Setting(
        "ALLOW_PRIVATE_ADDRESSES", bool, False, check_id="notifications.E001",
        doc="`True` lets webhooks reach internal addresses, for tests or an internal receiver (every block of IANA's "
        "special-purpose registries that is not globally reachable: loopback, private, shared, link-local, "
        "site-local, unique-local, documentation, benchmarking, multicast, reserved, IPv4-mapped and -translated; "
        "and such IPv4 addresses in NAT64, 6to4, Teredo or IPv4-compatible form); off, such a URL is refused when "
        "it is saved and again when it is sent to (SSRF)",
        hint="Leave it False in production: an endpoint's owner could otherwise reach your internal services.",
    ),
    Setting(
        "ALLOW_HTTP", bool, False, check_id="notifications.E001",
        doc="`True` admits `http://` endpoints; off, only `https://`",
        hint="Leave it False in production: the body and its signature would travel in clear.",
    ),
    Setting(
        "TIMEOUT", float, 5.0, exclusive_minimum=0, maximum=60, kind=_SECONDS, check_id="notifications.E002",
        doc="seconds a webhook's whole request may take, from resolving its host to the answer's last byte (a "
        "receiver still sending then, or a resolver still silent, is cut off and the attempt fails as a "
        "`timeout`); saving an endpoint waits as long for its host to resolve",
        hint="A receiver should answer at once and work later; 5 s is generous.",
    ),
    Setting(
        "MAX_RESPONSE_BYTES", int, 65_536, minimum=0, check_id="notifications.E003",
        doc="bytes of a receiver's answer read (the rest is dropped; the first 1,000 characters are kept)",
        hint="A receiver's answer only needs its status.",
    ),
    Setting(
        "RETRY_FOR", float, 86_400.0, exclusive_minimum=0, kind=_SECONDS, check_id="notifications.E002",
        doc="seconds a failing delivery is retried, with exponential backoff, before it is given up",
        hint="A day covers a receiver's deploy or outage.",
    ),
    Setting(
        "BACKOFF", float, 30.0, exclusive_minimum=0, kind=_SECONDS, check_id="notifications.E002",
        doc="seconds before the first retry; each next one waits twice as long, up to `MAX_BACKOFF`",
        hint="30 s, then 1, 2, 4 ... minutes.",
    ),
    Setting(
        "MAX_BACKOFF", float, 3_600.0, exclusive_minimum=0, kind=_SECONDS, check_id="notifications.E002",
        doc="the longest wait between two attempts of one delivery",
        hint="An hour keeps a day of retries to about thirty attempts.",
    ),
    Setting(
        "DISABLE_AFTER", int, 20, minimum=1, check_id="notifications.E003",
        doc="failed attempts in a row after which an endpoint is disabled (its owner's contacts are e-mailed)",
        hint="An endpoint that answered nothing but errors this many times is turned off until re-enabled.",
    ),
    Setting(
        "KEY_EXPIRY_NOTICE_DAYS", int, 7, minimum=1, check_id="notifications.E003",
        doc="days before an API key expires that its subscription hears of it (`api_key.expiring`, once per key)",
        hint="A week leaves time to issue a new key.",
    ),
    Setting(
        "REFUSALS_ALERT", int, 100, minimum=1, check_id="notifications.E003",
        doc="requests of a subscription refused in 5 minutes that make a `refusals.sustained` event (at most one "
        "an hour per subscription)",
        hint="The design's 'many refusals in five minutes'; 100 is about one every three seconds.",
    ),
    Setting(
        "MAX_ENDPOINTS", int, 10, minimum=1, check_id="notifications.E003",
        doc="webhook endpoints one subscription may register, at most (each event is sent to every one of them)",
        hint="Ten covers staging, production and a few tools; more multiplies every event's fan-out.",
    ),
    Setting(
        "MAX_CONTACTS", int, 10, minimum=1, check_id="notifications.E003",
        doc="e-mail contacts one subscription may have, at most (each event is mailed to every one of them)",
        hint="Ten covers a team; a mailing list is one address.",
    ),
    Setting(
        "FROM_EMAIL", str | None, None, check_id="notifications.E004",
        doc="the sender of notification e-mails (`None`: Django's `DEFAULT_FROM_EMAIL`)",
        hint="An address your mail server may send from.",
    ),
)  # fmt: skip

DEFAULTS: dict[str, Any] = defaults(SETTINGS)


#: ``QUOTAS['NOTIFICATIONS']`` itself, registered by :meth:`notifications.apps.NotificationsAppConfig.ready`:
#: checked with ``QUOTAS`` (quotas/settings/checking.py), and a table of the settings reference.
SECTION = app_section(
    "notifications", SETTINGS, "NOTIFICATIONS", check_id="notifications.E000", unknown_id="notifications.W001",
    doc="webhooks and e-mail to customers, read when `notifications` is installed (its keys below)",
)  # fmt: skip

#: ``QUOTAS['NOTIFICATIONS']``, key by key, with :data:`DEFAULTS` filled in.
notification_settings = SectionSettings("NOTIFICATIONS", SETTINGS)
