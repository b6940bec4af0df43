"""The service's Call sets every field of Verdict and DecideCall itself (one frame rather than their two
``__init__``s): those it is not given must stay at the dataclasses' own defaults."""

from __future__ import annotations

import dataclasses

from quotas.decide.hot_path import Call
from quotas.decide.shapes import Facts, Verdict
from quotas.identity.clients import Client
from quotas.store.decision import DecideCall


def test_a_call_has_every_field_given_or_at_its_default():
    client = Client.of_user(7)
    facts = Facts(http_request=None, request="the request", weight=3)
    windows = ("a window",)
    call = Call(
        "the engine", facts, "the runtime", "the rules", client, 12, None, windows, 40, "12|-", 0.5, 1.0, False,
        True, (5, 0.25, 1000),
    )  # type: ignore[arg-type]  # fmt: skip
    given = {
        "client": client, "plan_id": 12, "request": "the request", "engine": "the engine", "tag": client.tag,
        "windows": windows, "weight": 3, "cost_micros": 40, "usage": "12|-", "multiplier": 0.5, "ban_policy": "",
        "request_id": "", "allowance_ok": True, "allowance": (5, 0.25, 1000),
    }  # fmt: skip
    fields = [*dataclasses.fields(Verdict), *dataclasses.fields(DecideCall)]
    assert {f.name for f in fields} >= set(given)
    for field in fields:
        expected = given.get(field.name, field.default)
        assert getattr(call, field.name) == expected, field.name
