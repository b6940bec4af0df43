"""The forms of the subscription admin's intermediate pages (moving plans, issuing keys)."""

from __future__ import annotations

from datetime import datetime

from django import forms
from django.utils import timezone

from .expiry import EXAMPLES, parse_expiry
from .models import Plan


class MovePlanForm(forms.Form):
    plan = forms.ModelChoiceField(Plan.objects.all(), label="Move to plan", empty_label=None)


class IssueKeyForm(forms.Form):
    """What the issue-key action asks before minting: an optional expiry, in ``issue_key --expires``'s syntax."""

    expires = forms.CharField(
        label="Expires",
        required=False,
        max_length=40,
        help_text=f"When the keys stop working: {EXAMPLES} (project time zone). Empty: never.",
    )

    def clean_expires(self) -> datetime | None:
        text = self.cleaned_data["expires"].strip()
        if not text:
            return None
        try:
            return parse_expiry(text, timezone.now())
        except ValueError as exc:
            message = str(exc)
            raise forms.ValidationError(message[:1].upper() + message[1:] + ".") from None
