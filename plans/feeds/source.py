"""Reading a feed's bytes: an http(s) URL through the SSRF guard, or a file inside an allowed directory."""

from __future__ import annotations

import http.client
import os

from quotas.outbound import Policy, Refused, check_url, request

from ..conf import feed_settings

USER_AGENT = "quota-platform-acl-feeds/1"
HTTP_OK = 200


class FeedError(Exception):
    """A feed that could not be read or parsed; the message says why, in words an operator can act on."""


def is_url(source: str) -> bool:
    """Whether ``source`` names a URL (else it is a file path)."""
    return source.startswith(("http://", "https://"))


def check_source(source: str) -> None:
    """Raise :class:`FeedError` unless ``source`` is a URL or file the settings allow reading (nothing is read)."""
    if is_url(source):
        try:
            check_url(source, allow_http=bool(feed_settings.ALLOW_HTTP), allow_private=_private())
        except Refused as exc:
            raise FeedError(f"not fetched: {exc}") from exc
        return
    _allowed_path(source)


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


def _allowed_path(path: str) -> str:
    """``path`` resolved, once it lies inside one of ``FILE_DIRECTORIES`` (symbolic links followed first)."""
    if not os.path.isabs(path):
        raise FeedError("a feed's source is an https:// URL or an absolute file path")
    real = os.path.realpath(path)
    for directory in feed_settings.FILE_DIRECTORIES:
        root = os.path.realpath(directory)
        if os.path.commonpath([root, real]) == root:
            return real
    raise FeedError(f"{path} is not inside a directory of QUOTAS['ACL_FEEDS']['FILE_DIRECTORIES'], so it is not read")


def _read_file(path: str) -> bytes:
    real = _allowed_path(path)
    try:
        with open(real, "rb") as file:
            data = file.read(_limit() + 1)
    except OSError as exc:
        raise FeedError(f"reading failed: {exc.strerror or exc}") from exc
    if len(data) > _limit():
        raise _too_large()
    return data
