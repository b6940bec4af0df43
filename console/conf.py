"""The console's settings, read from ``QUOTAS['CONSOLE']`` in Django settings.

Described once in :data:`SETTINGS` (type, default, check id, hint, doc), as the notifications app's are: checked
at start-up with ``QUOTAS`` (the app registers :data:`SECTION`) and listed in the settings reference. Looked up
on every access, so ``override_settings`` works.
"""

from __future__ import annotations

from typing import Any

from quotas.settings import SectionSettings, Setting, defaults
from quotas.settings import validators as valid
from quotas.settings.registry import app_section

#: The longest overlap of a rolled API key or webhook secret: a week, as Stripe allows.
MAX_OVERLAP_SECONDS = 7 * 86_400

SETTINGS = (
    Setting(
        "API_RATE", str | None, "60/min", kind="a rate or None", validate=valid.rate, check_id="quota_console.E001",
        doc="the default rate of the self-service API per client, unless the client's plan has limits of scope "
        "`console_api`; `None` turns the default off",
        hint="Use a rate such as '60/min'.",
    ),
    # Ten minutes: a mail held back by greylisting or a slow spam filter arrives in that time, so a sooner resend
    # only doubles what a stranger receives; six an hour at most to one address.
    Setting(
        "CONFIRMATION_INTERVAL", int | None, 600, minimum=1, kind="a number of seconds or None",
        check_id="quota_console.E002",
        doc="seconds before one address of a subscription is mailed another confirmation link (a resend, the "
        "address given to a contact again, or deleted and added again); sooner is a `429`; `None`: no wait",
        hint="600 (ten minutes) lets a mail delayed by greylisting arrive before another is sent.",
    ),
    # Twenty: a team's contacts added at once fit; past that, one owner cannot make the platform mail strangers
    # more than twenty messages an hour, however many addresses it tries.
    Setting(
        "CONFIRMATIONS_PER_HOUR", int | None, 20, minimum=1, kind="a number of mails or None",
        check_id="quota_console.E003",
        doc="confirmation links one subscription may have mailed in an hour (a sliding hour, all its addresses "
        "together); more is a `429`; `None`: no limit",
        hint="Enough for the contacts a customer adds at once; it bounds what one owner can have mailed.",
    ),
)  # fmt: skip

DEFAULTS: dict[str, Any] = defaults(SETTINGS)

#: ``QUOTAS['CONSOLE']`` itself, registered by :meth:`console.apps.ConsoleAppConfig.ready`.
SECTION = app_section(
    "console", SETTINGS, "CONSOLE", check_id="quota_console.E000", unknown_id="quota_console.W001",
    doc="the customer's self-service API, read when `console` is installed (its keys below)",
)  # fmt: skip

#: ``QUOTAS['CONSOLE']``, key by key, with :data:`DEFAULTS` filled in.
console_settings = SectionSettings("CONSOLE", SETTINGS)
