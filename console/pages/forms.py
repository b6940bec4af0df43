"""The page's forms: what each of its POSTs carries, parsed before the action (in :mod:`console.caps`,
:mod:`console.keys`, :mod:`console.webhooks`, :mod:`console.contacts`) checks the rest. Each field's rules are
:mod:`console.fields`', as the API's serializers have them."""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from notifications.events import EVENT_CHOICES

from .. import caps, fields

#: The overlaps a key or a secret may be rolled with, in seconds, as the page offers them.
OVERLAPS = ((0, "none"), (3600, "1 h"), (86_400, "24 h"), (7 * 86_400, "7 days"))


class CapForm(forms.Form):
    period = forms.ChoiceField(choices=[(p, p) for p in caps.PERIODS])
    amount = forms.DecimalField(required=False, **fields.CAP_AMOUNT)
    action = forms.ChoiceField(choices=[("set", "set"), ("remove", "remove")], initial="set")


class ThresholdsForm(forms.Form):
    percents = forms.CharField(
        required=False, max_length=100, help_text="Whole percentages, separated by commas, e.g. 50, 75, 90."
    )

    def clean_percents(self) -> list[int]:
        text = self.cleaned_data["percents"].replace(" ", "")
        try:
            return [int(part) for part in text.split(",") if part]
        except ValueError:
            raise ValidationError("Whole percentages, separated by commas, e.g. 50, 75, 90.") from None


class KeyForm(forms.Form):
    """Create a key: a name, and an optional expiry (UTC)."""

    name = forms.CharField(required=False, **fields.KEY_NAME)
    expires_at = forms.DateTimeField(
        required=False,
        label="Expires (UTC)",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
    )

    def __init__(self, data: Any = None) -> None:
        super().__init__(data, auto_id="key-%s")  # ids unique on the page


class RollForm(forms.Form):
    """Roll a key or a secret: how long the old one works beside the new one."""

    overlap_seconds = forms.TypedChoiceField(choices=[(str(s), label) for s, label in OVERLAPS], coerce=int)


class KeyLimitsForm(forms.Form):
    """A key's own limits: its rates, and a spending cap per day or month (no period: none)."""

    own_rates = forms.CharField(
        required=False, label="Own rates", help_text="e.g. 10/min; 1000/day", **fields.OWN_RATES
    )
    cap_period = forms.ChoiceField(
        choices=[("", "no cap"), *((p, f"a {p}") for p in fields.KEY_CAP_PERIODS)], required=False
    )
    cap_amount = forms.DecimalField(required=False, **fields.KEY_CAP_AMOUNT)


class EndpointForm(forms.Form):
    """Register an endpoint: its URL, the event types it wants, a description."""

    url = forms.URLField(assume_scheme="https", label="URL", **fields.ENDPOINT_URL)
    events = forms.MultipleChoiceField(
        choices=EVENT_CHOICES, required=False, widget=forms.CheckboxSelectMultiple, help_text="None ticked: all."
    )
    description = forms.CharField(required=False, **fields.DESCRIPTION)

    def __init__(self, data: Any = None) -> None:
        super().__init__(data, auto_id="webhook-%s")


class ActiveForm(forms.Form):
    """Enable or disable an endpoint."""

    is_active = forms.TypedChoiceField(choices=[("true", "enable"), ("false", "disable")], coerce=lambda v: v == "true")


class ContactForm(forms.Form):
    """Add a contact: its address and the event types it is mailed."""

    email = forms.EmailField(**fields.EMAIL)
    events = forms.MultipleChoiceField(
        choices=EVENT_CHOICES, required=False, widget=forms.CheckboxSelectMultiple, help_text="None ticked: all."
    )

    def __init__(self, data: Any = None) -> None:
        super().__init__(data, auto_id="contact-%s")


def problems(form: forms.Form) -> list[str]:
    """Every error of ``form``, as its section shows them (a field's with the field's label)."""
    shown = []
    for name, errors in form.errors.items():
        field = form.fields.get(name)
        label = (field.label or name.replace("_", " ").capitalize()) if field is not None else ""
        shown += [f"{label}: {e}" if label else str(e) for e in errors]
    return shown


def add_errors(form: forms.Form, exc: ValidationError) -> None:
    """Put an action's ``ValidationError`` on ``form``: on the field it names, else on the form."""
    if not hasattr(exc, "error_dict"):
        form.add_error(None, exc.messages)
        return
    for field, messages in exc.message_dict.items():
        form.add_error(field if field in form.fields else None, messages)
