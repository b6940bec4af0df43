"""The admin never shows an API key's stored hash, nor lets it be guessed through the changelist's filters."""

from __future__ import annotations

import pytest
from django.test import Client

from plans.models import APIKey
from tests.factories import SubscriptionFactory, UserFactory, issue_key

pytestmark = pytest.mark.django_db


@pytest.fixture
def superuser() -> Client:
    browser = Client(raise_request_exception=False)
    browser.force_login(UserFactory(is_staff=True, is_superuser=True))
    return browser


@pytest.fixture
def key() -> APIKey:
    sub = SubscriptionFactory(name="acme")
    issue_key(sub)
    return APIKey.objects.get(subscription=sub)


def test_the_change_page_of_a_key_does_not_show_its_hash(superuser, key):
    """Even a superuser sees the prefix, name and dates of a key, never the hash that authenticates it."""
    page = superuser.get(f"/admin/quota_plans/apikey/{key.pk}/change/")
    assert page.status_code == 200
    text = page.content.decode()
    assert key.prefix in text
    assert key.key_hash not in text
    assert key.key_hash[:16] not in text
    assert "key_hash" not in text
    assert "Key hash" not in text


def test_the_list_and_search_do_not_show_the_hash(superuser, key):
    for url in (
        "/admin/quota_plans/apikey/",
        f"/admin/quota_plans/apikey/?q={key.prefix}",
        "/admin/quota_plans/subscription/",
    ):
        page = superuser.get(url)
        assert page.status_code == 200
        assert key.key_hash not in page.content.decode()
    searched = superuser.get(f"/admin/quota_plans/apikey/?q={key.key_hash}")
    assert searched.status_code == 200
    assert "0 API keys" in searched.content.decode()  # the hash is not searchable either


@pytest.mark.parametrize("lookup", ["key_hash__startswith", "key_hash", "key_hash__regex", "key_hash__gt"])
def test_the_hash_cannot_be_guessed_through_a_changelist_filter(superuser, key, lookup):
    """A filter on the hash in the query string is refused (400): the count of matching keys would say
    whether a guess of its first characters is right."""
    value = key.key_hash[:2] if lookup != "key_hash__regex" else f"^{key.key_hash[:2]}"
    page = superuser.get("/admin/quota_plans/apikey/", {lookup: value})
    assert page.status_code == 400
    assert key.prefix not in page.content.decode()


@pytest.mark.parametrize(
    ("url", "lookup"),
    [
        ("/admin/quota_plans/subscription/", "api_keys__key_hash__startswith"),
        ("/admin/quota_plans/aclentry/", "api_key__key_hash"),
    ],
)
def test_nor_through_a_related_admin(superuser, key, url, lookup):
    assert superuser.get(url, {lookup: key.key_hash[:2]}).status_code == 400
