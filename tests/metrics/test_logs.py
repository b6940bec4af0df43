"""quotas.observability.logs: the audit trail's JSON lines, with the request id."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

import pytest
from django.test import RequestFactory

from quotas.formats.rates import parse_rates
from quotas.observability.logs import AUDIT_LOGGER, JsonFormatter, log_ban, log_denial, request_id, summarize_decision
from quotas.rules.limits import LimitRule


@pytest.fixture
def audit_lines():
    """The JSON lines the audit logger writes while the test runs (through JsonFormatter)."""
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(self.format(record))

    handler = Collect()
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger(AUDIT_LOGGER)
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.INFO)
    yield lines
    logger.removeHandler(handler)
    logger.setLevel(old_level)


def test_settings_send_the_audit_logger_through_the_json_formatter():
    from django.conf import settings

    logging_config = settings.LOGGING
    assert logging_config["formatters"]["json"]["()"] == "quotas.observability.logs.JsonFormatter"
    assert logging_config["loggers"][AUDIT_LOGGER]["handlers"] == ["audit"]
    assert logging_config["handlers"]["audit"]["formatter"] == "json"


def test_a_denial_is_one_json_line_with_the_clients_request_id(audit_lines):
    request = RequestFactory().get("/api/demo/search", {"q": "x"}, HTTP_X_REQUEST_ID="req-123")
    log_denial(request, {"client": "{s.12}", "plan": "free", "scope": "search", "reason": "rate", "retry_after": 7})
    assert len(audit_lines) == 1
    assert "\n" not in audit_lines[0]
    line = json.loads(audit_lines[0])
    assert line["event"] == "quota.denied"
    assert line["request_id"] == "req-123"
    assert line["level"] == "INFO"
    assert line["logger"] == AUDIT_LOGGER
    assert (line["method"], line["path"]) == ("GET", "/api/demo/search")
    assert (line["client"], line["plan"], line["scope"], line["reason"], line["retry_after"]) == (
        "{s.12}", "free", "search", "rate", 7
    )  # fmt: skip
    datetime.fromisoformat(line["ts"])


def test_without_a_header_one_id_is_made_and_shared_by_the_denial_and_the_ban(audit_lines):
    request = RequestFactory().get("/api/demo/ping")
    log_denial(request, {"client": "{s.12}", "reason": "banned"})
    log_ban(request, "{s.12}", "free", datetime(2030, 1, 1, tzinfo=UTC), strikes=3)
    denial, ban = (json.loads(line) for line in audit_lines)
    assert denial["request_id"] == ban["request_id"] == request_id(request)
    assert len(denial["request_id"]) == 32
    assert ban["event"] == "quota.banned"
    assert ban["level"] == "WARNING"
    assert (ban["client"], ban["plan"], ban["until"], ban["strikes"]) == (
        "{s.12}", "free", "2030-01-01T00:00:00+00:00", 3
    )  # fmt: skip


def test_a_drf_request_shares_the_id_of_its_django_request(audit_lines):
    from rest_framework.request import Request

    django_request = RequestFactory().get("/api/demo/ping", HTTP_X_REQUEST_ID="abc")
    assert request_id(Request(django_request)) == request_id(django_request) == "abc"


@pytest.mark.parametrize("header", ["", "has spaces", "x" * 200, 'quote"s', "line\nbreak"])
def test_an_unusable_request_id_header_is_replaced(header):
    request = RequestFactory().get("/", HTTP_X_REQUEST_ID=header)
    rid = request_id(request)
    assert rid != header
    assert len(rid) == 32


def test_the_summary_cannot_overwrite_the_requests_own_fields(audit_lines):
    request = RequestFactory().get("/real", HTTP_X_REQUEST_ID="real-id")
    log_denial(request, {"request_id": "forged", "path": "/forged", "reason": "rate"})
    line = json.loads(audit_lines[0])
    assert (line["request_id"], line["path"]) == ("real-id", "/real")


def test_a_ban_outside_a_request_still_gets_an_id(audit_lines):
    log_ban(None, "{ip.192.0.2.0}", None, 1_900_000_000.0)
    line = json.loads(audit_lines[0])
    assert line["until"] == "2030-03-17T17:46:40+00:00"
    assert len(line["request_id"]) == 32
    assert line["plan"] is None


def test_values_json_cannot_hold_are_written_as_text_and_exceptions_stay_on_one_line():
    formatter = JsonFormatter()
    try:
        raise ValueError("boom\nsecond line")
    except ValueError:
        import sys

        record = logging.LogRecord("quotas.audit", logging.ERROR, __file__, 1, "failed %s", ("x",), sys.exc_info())
    record.audit = {"amount": __import__("decimal").Decimal("0.05"), "when": datetime(2030, 1, 1, tzinfo=UTC)}
    record.extra_field = {"nested": True}
    text = formatter.format(record)
    assert "\n" not in text
    line = json.loads(text)
    assert line["message"] == "failed x"
    assert line["amount"] == "0.05"
    assert line["when"] == "2030-01-01 00:00:00+00:00"
    assert line["extra_field"] == {"nested": True}
    assert "ValueError: boom" in line["exc_info"]


def test_summarize_decision_describes_a_real_refusal(runtime):
    rule = LimitRule(id="search", name="search", rates=parse_rates("1/min"), algorithm="fixed_window")
    tag = "{s.77}"
    assert runtime.guard.decide(tag, rule.windows).allowed
    refused = runtime.guard.decide(tag, rule.windows)
    assert not refused.allowed
    summary = summarize_decision(refused, plan="free", scope="search", reason="rate")
    assert summary["client"] == tag
    assert summary["limits"] == [rule.windows[0].policy]
    assert 1 <= summary["retry_after"] <= 60
    assert summary["local"] is False
    json.dumps(summary)
