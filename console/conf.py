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
)  # fmt: skip

DEFAULTS: dict[str, Any] = defaults(SETTINGS)

#: ``QUOTAS['CONSOLE']`` itself, registered by :meth:`console.apps.ConsoleAppConfig.ready`.
SECTION = app_section(
    "console", SETTINGS, "CONSOLE", check_id="quota_console.E000", unknown_id="quota_console.W001",
    doc="the customer's self-service API, read when `console` is installed (its keys below)",
)  # fmt: skip

#: ``QUOTAS['CONSOLE']``, key by key, with :data:`DEFAULTS` filled in.
console_settings = SectionSettings("CONSOLE", SETTINGS)
