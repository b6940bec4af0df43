"""Reading a feed's bytes: an http(s) URL through the SSRF guard, or a file inside an allowed directory.

What a source may be is the model's rule (:mod:`plans.models.feeds`, checked when a feed is saved); it is checked
again here, at every read, because the settings or a name's addresses may have changed since.
"""

from __future__ import annotations

import http.client

from quotas.outbound import Policy, Refused, request

from ..conf import feed_settings
from ..models.feeds import FeedError, allowed_path, is_url

USER_AGENT = "quota-platform-acl-feeds/1"
HTTP_OK = 200


def read_source(source: str) -> bytes:
    """The bytes of the feed at ``source`` (at most ``MAX_BYTES``); raises :class:`FeedError` naming what failed."""
    return _fetch(source) if is_url(source) else _read_file(source)


def _private() -> bool:
    return bool(feed_settings.ALLOW_PRIVATE_ADDRESSES)


def _limit() -> int:
    return int(feed_settings.MAX_BYTES)


def _too_large() -> FeedError:
    return FeedError(f"the feed is larger than QUOTAS['ACL_FEEDS']['MAX_BYTES'] ({_limit():,} bytes)")


def _fetch(url: str) -> bytes:
    policy = Policy(
        allow_http=bool(feed_settings.ALLOW_HTTP),
        allow_private=_private(),
        timeout=float(feed_settings.TIMEOUT),
        limit=_limit(),
    )
    try:
        answer = request("GET", url, policy, headers={"User-Agent": USER_AGENT, "Accept": "text/plain"})
    except Refused as exc:
        raise FeedError(f"not fetched: {exc}") from exc
    except (OSError, http.client.HTTPException) as exc:  # timeouts are OSErrors
        raise FeedError(f"fetching failed: {type(exc).__name__}: {exc}") from exc
    if answer.status != HTTP_OK:  # redirects are not followed (the guard checked this URL's address only)
        raise FeedError(f"the server answered HTTP {answer.status}")
    if answer.truncated:
        raise _too_large()
    return answer.body


def _read_file(path: str) -> bytes:
    real = allowed_path(path)
    try:
        with open(real, "rb") as file:
            data = file.read(_limit() + 1)
    except OSError as exc:
        raise FeedError(f"reading failed: {exc.strerror or exc}") from exc
    if len(data) > _limit():
        raise _too_large()
    return data
