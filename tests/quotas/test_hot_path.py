"""The hot path touches no database: after the first request of a key, zero queries per request."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from demo.seed import demo_key


@pytest.mark.django_db
def test_no_database_query_per_request():
    call_command("seed_demo", stdout=io.StringIO())
    client = APIClient()
    key = demo_key("pro")
    client.get("/api/demo/ping", HTTP_X_API_KEY=key)  # loads the rules and caches the key
    with CaptureQueriesContext(connection) as queries:
        for _ in range(20):
            assert client.get("/api/demo/ping", HTTP_X_API_KEY=key).status_code == 200
    assert len(queries) == 0, [q["sql"] for q in queries]
