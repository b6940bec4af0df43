"""When an API key stops working, as people type it: ``30d``, ``12h``, ``90m``, a date or a date-time.

One parser for ``manage.py issue_key --expires`` and the admin's issue-key
form, so both accept the same text and refuse it with the same words.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

EXAMPLES = "30d, 12h, 90m, 2027-01-31 or 2027-01-31T18:00"

_DURATION = re.compile(r"(\d{1,6})([dhm])")
_UNITS = {"d": "days", "h": "hours", "m": "minutes"}


def parse_expiry(value: str, now: datetime) -> datetime:
    """``value`` as an aware moment after ``now``.

    A date or a date-time without a zone is in the project's TIME_ZONE.
    Raises ValueError, its message fit to show the user, for text that is
    none of the accepted forms or a moment not after ``now``.
    """
    text = value.strip()
    duration = _DURATION.fullmatch(text)
    try:
        if duration:
            moment = now + timedelta(**{_UNITS[duration[2]]: int(duration[1])})
        elif (day := parse_date(text)) is not None:
            moment = timezone.make_aware(datetime(day.year, day.month, day.day))
        elif (parsed := parse_datetime(text)) is not None:
            moment = parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed)
        else:
            raise ValueError("not a duration, date or date-time")
    except (ValueError, OverflowError) as exc:
        raise ValueError(f"{exc}; use e.g. {EXAMPLES}") from None
    if moment <= now:
        when = moment.isoformat(timespec="seconds")
        raise ValueError(f"this moment is in the past ({when}): the key would never work")
    return moment
