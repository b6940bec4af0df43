"""Structured audit log: one JSON line per refusal and per ban, on the ``quotas.audit`` logger.

``config/settings.py`` sends that logger, and only it, through
:class:`JsonFormatter` to stderr; any project can do the same::

    LOGGING["formatters"]["json"] = {"()": "quotas.observability.logs.JsonFormatter"}
    LOGGING["handlers"]["audit"] = {"class": "logging.StreamHandler", "formatter": "json"}
    LOGGING["loggers"]["quotas.audit"] = {"handlers": ["audit"], "level": "INFO", "propagate": False}

Every line carries the request id: the client's ``X-Request-ID`` when it is a
sane token, else one generated here and kept on the request, so the refusal
and the ban of one request share it. Lines name the client by its tag (an
encoded key id, user id or IP network), never by a raw API key.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from datetime import UTC, datetime
from typing import Any

AUDIT_LOGGER = "quotas.audit"
audit_logger = logging.getLogger(AUDIT_LOGGER)

REQUEST_ID_HEADER = "HTTP_X_REQUEST_ID"
#: Where a request's id is kept in its ``META``, as a WSGI component keeps its own data in the environ.
REQUEST_ID_KEY = "quotas.request_id"
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
_MAX_PATH = 512

# Attributes every LogRecord has; anything else on a record came from ``extra`` and is written out.
_RECORD_ATTRS = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "audit"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``ts`` (UTC, ISO 8601), ``level``, ``logger``, ``message``, then the fields.

    Fields come from ``extra={"audit": {...}}`` (the audit helpers below) and
    from any other ``extra`` keys; values JSON cannot hold are written with
    ``str()``. A traceback goes in ``exc_info`` (escaped: still one line).
    """

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "audit", None)
        if isinstance(fields, dict):
            payload.update(fields)
        for name, value in record.__dict__.items():
            if name not in _RECORD_ATTRS and name not in payload:
                payload[name] = value
        if record.exc_info:
            payload["exc_info"] = self.formatException(record.exc_info)
        if record.stack_info:
            payload["stack_info"] = self.formatStack(record.stack_info)
        return json.dumps(payload, default=str, separators=(",", ":"))


def request_id(request: Any) -> str:
    """The id of ``request`` (a Django or DRF request, or None): its ``X-Request-ID``, else a new one, kept in its
    ``META`` (which DRF's request reads from Django's) under :data:`REQUEST_ID_KEY`."""
    if request is None:
        return uuid.uuid4().hex
    meta = request.META
    known = meta.get(REQUEST_ID_KEY)
    if known:
        return known
    given = meta.get(REQUEST_ID_HEADER, "")
    rid = meta[REQUEST_ID_KEY] = given if _REQUEST_ID.fullmatch(given) else uuid.uuid4().hex
    return rid


def _request_fields(request: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {"request_id": request_id(request)}
    if request is not None:
        fields["method"] = request.method
        fields["path"] = request.path[:_MAX_PATH]
    return fields


def log_denial(request: Any, decision_summary: dict[str, Any]) -> None:
    """Write one ``quota.denied`` line: the request's id, method and path, then ``decision_summary``.

    ``decision_summary`` is what the caller knows, e.g. from
    :func:`summarize_decision`: client tag, plan, scope, reason, retry_after,
    the denying limits. The request's own fields (``request_id``, ``method``,
    ``path``) take precedence over keys of the same name in it.
    """
    if not audit_logger.isEnabledFor(logging.INFO):
        return
    fields = {"event": "quota.denied", **decision_summary, **_request_fields(request)}
    audit_logger.info("quota denied", extra={"audit": fields})


def log_ban(
    request: Any,
    client: str,
    plan: str | None,
    until: datetime | float,
    **details: Any,
) -> None:
    """Write one ``quota.banned`` line: who (client tag), on which plan, until when (UTC), and ``details``.

    ``request`` may be None (a ban recorded outside a request); a new request id is then made up.
    """
    if isinstance(until, int | float):
        until = datetime.fromtimestamp(until, UTC)
    fields = {
        "event": "quota.banned",
        **details,
        "client": client,
        "plan": plan,
        "until": until.isoformat(timespec="seconds"),
        **_request_fields(request),
    }
    audit_logger.warning("client banned", extra={"audit": fields})


def summarize_decision(decision: Any, *, plan: str | None, scope: str | None, reason: str) -> dict[str, Any]:
    """What :func:`log_denial` should say about a refused :class:`quotas.store.decision.Decision`."""
    summary: dict[str, Any] = {
        "client": decision.tag,
        "plan": plan,
        "scope": scope or None,
        "reason": reason,
        "retry_after": decision.retry_after,
        "local": decision.local,
    }
    denying = decision.denying_states()
    if denying:
        summary["limits"] = [state.window.policy for state in denying]
    return summary
