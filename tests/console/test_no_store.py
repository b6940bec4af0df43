"""Every answer of the self-service API that carries a secret (an API key's raw text, a webhook's signing secret:
shown once, in the answer that made it) is marked ``Cache-Control: no-store``, as the page's is, so no browser or
proxy cache keeps it; the answers that list or read them carry none."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]


@pytest.fixture(autouse=True)
def no_console_rate(set_quotas):
    set_quotas("CONSOLE", API_RATE=None)


def test_each_answer_that_shows_a_secret_is_not_stored(team, owner_api, receiver, internal_allowed):
    """POST keys, keys/{id}/roll, webhooks and webhooks/{id}/roll_secret: the secret, and no-store."""
    answers = {}
    answers["keys"] = owner_api.post(team.url("keys"), {"name": "ci"}, format="json")
    key_id = answers["keys"].json()["id"]
    answers["keys/{id}/roll"] = owner_api.post(team.url(f"keys/{key_id}/roll"), {"overlap_seconds": 0}, format="json")
    answers["webhooks"] = owner_api.post(team.url("webhooks"), {"url": receiver.url}, format="json")
    hook_id = answers["webhooks"].json()["id"]
    answers["webhooks/{id}/roll_secret"] = owner_api.post(
        team.url(f"webhooks/{hook_id}/roll_secret"), {"overlap_seconds": 0}, format="json"
    )
    for route, response in answers.items():
        assert response.status_code in (200, 201), (route, response.content)
        body = response.json()
        assert body.get("key", "").startswith("qk_") or body.get("secret", "").startswith("whsec_"), route
        assert "no-store" in response["Cache-Control"], route
    secrets = [a.json().get("key") or a.json()["secret"] for a in answers.values()]
    for read in ("keys", f"keys/{key_id}/limits", "webhooks", f"webhooks/{hook_id}"):
        body = owner_api.get(team.url(read)).content.decode()
        assert not any(secret in body for secret in secrets), read
