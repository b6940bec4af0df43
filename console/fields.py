"""The rules of the console's input fields, each written once and attached by both front doors: the API's
serializers and the page's forms build their fields with the same keyword arguments (DRF's fields and Django's
form fields both take ``max_length``; ``max_digits``, ``decimal_places`` and ``min_value``; ``min_value`` and
``max_value``), so the two cannot drift. Where a model keeps the value, its rule is read from the model's field.

What needs the database or more than one field (a cap at most its budget, rates that parse, an expiry ahead, an
https:// URL with a public address, an address not taken) is the action's to check, once, in :mod:`console.caps`,
:mod:`console.keys`, :mod:`console.key_limits`, :mod:`console.webhooks` and :mod:`console.contacts`.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.db import models

from notifications.models import Contact, Endpoint
from plans.models import APIKey, SpendCap
from plans.models.caps import FULL, MAX_THRESHOLDS

from .conf import MAX_OVERLAP_SECONDS


def _field(model: type[models.Model], name: str) -> Any:
    # Model._meta.get_field: Django's documented Model _meta API, public despite its underscore.
    return model._meta.get_field(name)


def _text(model: type[models.Model], name: str) -> dict[str, Any]:
    return {"max_length": _field(model, name).max_length}


def _amount(model: type[models.Model], name: str) -> dict[str, Any]:
    field = _field(model, name)  # never negative, as the model's validator says
    return {"max_digits": field.max_digits, "decimal_places": field.decimal_places, "min_value": Decimal(0)}


#: A key's name.
KEY_NAME = _text(APIKey, "name")
#: A key's own rates (their syntax is the model's ``clean_own_limits``').
OWN_RATES = _text(APIKey, "own_rates")
#: The periods a key's own cap may be set for.
KEY_CAP_PERIODS: list[str] = [value for value, _ in _field(APIKey, "cap_period").choices]
#: A key's own cap.
KEY_CAP_AMOUNT = _amount(APIKey, "cap_amount")
#: A subscription's cap of a period.
CAP_AMOUNT = _amount(SpendCap, "amount")
#: One alert threshold, and how many a subscription may have (their check is ``validate_percents``').
PERCENT: dict[str, Any] = {"min_value": 1, "max_value": FULL}
THRESHOLDS: dict[str, Any] = {"max_length": MAX_THRESHOLDS}
#: How long a rolled key or secret works beside its successor, in seconds (the actions' ``check_overlap``).
OVERLAP: dict[str, Any] = {"min_value": 0, "max_value": MAX_OVERLAP_SECONDS}
#: A webhook endpoint's URL and description.
ENDPOINT_URL = _text(Endpoint, "url")
DESCRIPTION = _text(Endpoint, "description")
#: A contact's address.
EMAIL = _text(Contact, "email")
