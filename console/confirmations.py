"""How often the console mails confirmation links: one to an address of a subscription every
``QUOTAS['CONSOLE']['CONFIRMATION_INTERVAL']`` seconds, and ``CONFIRMATIONS_PER_HOUR`` per subscription (a
sliding hour), so an owner cannot make the platform mail a stranger more than that, whether by resending, by
giving a contact an address again, or by deleting and adding it again (the address is counted, not the contact).

Counted in the database (:class:`~console.models.ConfirmationMail`), in the transaction of the change that mails
the link, with the subscription's row locked: two requests at once are counted one after the other, so they
cannot both take the last mail the limit allows, and a change refused, or rolled back, counts nothing. The mail
leaves after that commits; :func:`release` gives the count back when the mail server did not take it.

Time is the engine's clock (:func:`quotas.internal_api.now`), so a test moves it with ``quota_clock``.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from plans.models import Subscription
from quotas import internal_api

from .conf import console_settings
from .errors import MailLimitReached
from .models import ConfirmationMail

HOUR = timedelta(hours=1)
#: From how many seconds a wait is said in minutes.
IN_MINUTES = 120


def count_mail(subscription: Subscription, email: str) -> ConfirmationMail:
    """Count a confirmation mail to ``email`` of ``subscription``, now; raises
    :class:`~console.errors.MailLimitReached` when a limit is reached. Called in the change's transaction."""
    now = datetime.fromtimestamp(internal_api.now(), UTC)
    interval = console_settings.CONFIRMATION_INTERVAL
    per_hour = console_settings.CONFIRMATIONS_PER_HOUR
    address = email.lower()
    # Row lock: the count and the insert below are one step per subscription (PostgreSQL, MySQL; SQLite
    # serialises every write anyway).
    Subscription.objects.select_for_update().filter(pk=subscription.pk).values_list("pk", flat=True).first()
    sent = ConfirmationMail.objects.filter(subscription=subscription)
    sent.filter(sent_at__lte=now - max(HOUR, timedelta(seconds=interval or 0))).delete()  # counts nothing more
    if interval:
        last = sent.filter(email=address, sent_at__gt=now - timedelta(seconds=interval)).order_by("-sent_at").first()
        if last is not None:
            wait = _seconds(last.sent_at + timedelta(seconds=interval) - now)
            raise MailLimitReached(
                f"A confirmation link was mailed to {email} less than {_span(interval)} ago (one per address every "
                f"{_span(interval)}): try again in {_span(wait)}.",
                {"per": "address", "mails": 1, "seconds": interval},
                wait,
            )
    if per_hour:
        in_hour = sent.filter(sent_at__gt=now - HOUR).order_by("-sent_at").values_list("sent_at", flat=True)
        recent = list(in_hour[:per_hour])
        if len(recent) >= per_hour:
            wait = _seconds(recent[per_hour - 1] + HOUR - now)  # when the oldest mail that fills the hour leaves it
            raise MailLimitReached(
                f"This subscription has had {per_hour} confirmation links mailed in the last hour, its limit: try "
                f"again in {_span(wait)}.",
                {"per": "subscription", "mails": per_hour, "seconds": int(HOUR.total_seconds())},
                wait,
            )
    return ConfirmationMail.objects.create(subscription=subscription, email=address, sent_at=now)


def release(mail: ConfirmationMail) -> None:
    """Give back the count of a mail the mail server did not take (its owner may ask again at once)."""
    ConfirmationMail.objects.filter(pk=mail.pk).delete()


def _seconds(delta: timedelta) -> int:
    return max(1, math.ceil(delta.total_seconds()))


def _span(seconds: int) -> str:
    if seconds >= IN_MINUTES:
        return f"{math.ceil(seconds / 60)} minutes"
    return "1 second" if seconds == 1 else f"{seconds} seconds"
