"""Every mode of the usage API answers bodies its OpenAPI schema describes, exactly (no undocumented field).

The schema is the one a project serves (drf-spectacular at /api/schema/); its OpenAPI 3.0 ``nullable`` is
turned into JSON Schema's ``null`` type, and every object closed (``additionalProperties: false``), so a field
the code adds or renames without the schema fails here. The report's 200 body is ``oneOf`` three shapes (day
or scope, the operators' history, one client's history): each body must match exactly one.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from plans.models import CostBudget
from quotas.engine import default_engine
from tests.factories import EndpointLimitFactory, PlanFactory, issue_key

from .conftest import send
from .test_api import report, tag_of

pytestmark = pytest.mark.django_db

REPORT = "/api/v1/usage/"


def json_schema(node: Any) -> Any:
    """An OpenAPI 3.0 schema as JSON Schema 2020-12: nullable as a null type, objects closed, refs to $defs."""
    if isinstance(node, list):
        return [json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: json_schema(value) for key, value in node.items()}
    if "$ref" in node:
        node["$ref"] = node["$ref"].replace("#/components/schemas/", "#/$defs/")
    if "properties" in node and "additionalProperties" not in node:
        node["additionalProperties"] = False
    if node.pop("nullable", False):
        if "enum" in node:
            node["enum"] = [*node["enum"], None]
        if "type" in node:
            node["type"] = [node["type"], "null"]
        else:
            node = {"anyOf": [node, {"type": "null"}]}
    return node


@pytest.fixture
def schema(api) -> dict[str, Any]:
    response = api.get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    return response.json()


def validator(schema: dict[str, Any], path: str) -> Draft202012Validator:
    """The validator of ``path``'s GET 200 JSON body."""
    body = schema["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    defs = json_schema(schema["components"]["schemas"])
    return Draft202012Validator({**json_schema(body), "$defs": defs})


def assert_valid(check: Draft202012Validator, body: Any) -> None:
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in check.iter_errors(body)]
    assert errors == [], body


@pytest.fixture
def traffic(api, free, pro):
    """A free client refused by a rate, a pro one admitted, and a metered one refused by its day budget."""
    mine, theirs = issue_key(plan=free), issue_key(plan=pro)
    assert send(api, mine, 6) == {200: 5, 429: 1}
    assert send(api, theirs, 2) == {200: 2}
    metered = PlanFactory(slug="metered")
    EndpointLimitFactory(plan=metered, name="priced", scope="priced", rates="100/min", price=Decimal("0.01"))
    CostBudget.objects.create(plan=metered, period="day", amount=Decimal("0.02"))
    spender = issue_key(plan=metered)
    assert send(api, spender, 3, "/t/priced") == {200: 2, 429: 1}
    default_engine.runtime().tick()  # the history and the last refusals, as the poller writes them
    return mine, theirs, spender


@pytest.mark.urls("tests.urls")
def test_every_mode_of_the_report_matches_the_schema(api, staff, schema, traffic):
    """Day and scope (one client, every client), the operators' minutes and hours, a client's own minutes (by
    its key, and by staff naming it): each body is one of the three documented shapes, with no extra field."""
    mine, _, _ = traffic
    check = validator(schema, REPORT)
    bodies = {
        "day": report(api, group_by="day"),
        "scope": report(api, group_by="scope", client=tag_of(mine)),
        "minute": report(api, group_by="minute"),
        "hour": report(api, group_by="hour"),
        "staff client minute": report(api, group_by="minute", client=tag_of(mine)),
    }
    api.force_authenticate(None)
    bodies["own hour"] = report(api, mine, group_by="hour")
    for mode, response in bodies.items():
        assert response.status_code == 200, (mode, response.content)
        body = response.json()
        assert body["rows"], mode  # a shape is only checked on rows that exist
        assert_valid(check, body)
    shapes = {mode: set(response.json()["rows"][0]) - {"day", "scope", "start", "plan"} for mode, response in
              bodies.items()}  # fmt: skip
    assert len({frozenset(keys) for keys in shapes.values()}) == 1, shapes  # one set of counters everywhere


@pytest.mark.urls("tests.urls")
def test_the_standing_and_the_refusals_match_the_schema(api, staff, schema, traffic):
    """/current (under a key) and /refusals of a rate refusal and a budget refusal, whose money is a decimal
    string as everywhere else."""
    mine, _, spender = traffic
    refusals = validator(schema, "/api/v1/usage/refusals")
    for client in (mine, spender):
        body = api.get("/api/v1/usage/refusals", {"client": tag_of(client)}).json()
        assert body["refusals"], body
        assert_valid(refusals, body)
    (budget,) = api.get("/api/v1/usage/refusals", {"client": tag_of(spender)}).json()["refusals"]
    (window,) = budget["windows"]
    assert (budget["reason"], window["currency"], window["limit"]) == ("budget", "USD", "0.020000")
    api.force_authenticate(None)
    assert_valid(
        validator(schema, "/api/v1/usage/current"), api.get("/api/v1/usage/current", HTTP_X_API_KEY=mine).json()
    )


#: The usage API page's examples and the path each is a 200 body of.
EXAMPLES = {
    "report-day": REPORT,
    "report-history": REPORT,
    "report-client-history": REPORT,
    "refusals": "/api/v1/usage/refusals",
}


@pytest.mark.parametrize(("name", "path"), sorted(EXAMPLES.items()))
def test_the_usage_api_pages_examples_match_the_schema(schema, name, path):
    """docs/usage-api.md shows one body of each mode; each is a body the schema describes, exactly."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "usage-api.md").read_text(encoding="utf-8")
    found = re.search(rf"<!-- usage-example:{name} -->\n```json\n(.*?)```\n<!-- usage-example:end -->", page, re.DOTALL)
    assert found, f"docs/usage-api.md has no ```json block after <!-- usage-example:{name} -->"
    assert_valid(validator(schema, path), json.loads(found.group(1)))
