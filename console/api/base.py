"""What every self-service view shares: its throttle, its permission class, its errors (problem+json), its
``OPTIONS`` answer, the caller's account, and the answer that shows a secret once."""

from __future__ import annotations

from functools import cached_property
from typing import Any

from django.utils.cache import add_never_cache_headers
from rest_framework.generics import GenericAPIView
from rest_framework.metadata import SimpleMetadata
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from ..access import Account, account_for, require_owner
from ..errors import ReadOnly
from ..problems import api_error, exception_handler
from ..throttling import CONSOLE_SCOPE, ConsoleThrottle
from .permissions import ConsoleAccess


class ConsoleMetadata(SimpleMetadata):
    """``OPTIONS`` on a console route, allowed as its ``GET`` is (by :class:`~console.api.permissions.ConsoleAccess`):
    on a subscription's route, 401 without credentials and 404 on a subscription that is not the caller's (its id
    says nothing); then the route's name, description and media types, and (``actions``) the bodies of its ``PUT``
    and ``POST`` to those who may send them: owners, and anyone on a route that needs no sign-in (the
    confirmation's).

    DRF's own asks ``get_object()`` whether a ``PUT`` may change the URL's object; these views have no queryset
    (the console's actions look objects up per subscription), so that answered 500 to anyone."""

    def determine_actions(self, request: Request, view: Any) -> dict[str, Any]:
        if "subscription_id" in view.kwargs:
            try:
                require_owner(view.account)  # the permission class's rule for a change
            except ReadOnly:
                return {}  # members and keys read: no body to describe
        methods = sorted({"PUT", "POST"} & set(view.allowed_methods))
        return {method: self.get_serializer_info(view.get_serializer()) for method in methods}


class ConsoleView(GenericAPIView):
    """A view of one subscription's resources, at ``subscriptions/<subscription_id>/...``.

    Authentication is the project's (API key, session with CSRF, basic auth); who may call is
    :class:`~console.api.permissions.ConsoleAccess`'s (read: owners, members and the subscription's own keys;
    change: owners, signed in), checked before the handler, which finds the caller's standing in :attr:`account`.
    What :mod:`console.access` and the actions raise is answered by :func:`console.problems.api_error` and the
    console's problem handler.

    The console's throttle counts a request before its permission check (DRF checks permissions first): a caller
    refused (401, 403, 404) spends the console's allowance as one let through does, so trying other
    subscriptions' ids is held to its rate.
    """

    throttle_classes: list = [ConsoleThrottle]
    throttle_scope = CONSOLE_SCOPE
    permission_classes: list = [ConsoleAccess]
    renderer_classes = [JSONRenderer]
    metadata_class = ConsoleMetadata
    pagination_class = None

    @cached_property
    def account(self) -> Account:
        """The caller's standing on the URL's subscription (looked up once, by the permission check)."""
        return account_for(self.request.user, int(self.kwargs["subscription_id"]))

    def check_permissions(self, request: Request) -> None:
        super().check_throttles(request)  # first: see the class's docstring
        super().check_permissions(request)

    def check_throttles(self, request: Request) -> None:
        """Nothing more: :meth:`check_permissions` counted the request, before the permission check."""

    def handle_exception(self, exc: Exception) -> Any:
        return super().handle_exception(api_error(exc))

    def get_exception_handler(self) -> Any:
        return exception_handler


def shown_once(body: dict[str, Any], status: int) -> Response:
    """The answer that carries a secret, shown this once (an API key's raw text, a webhook's signing secret):
    ``Cache-Control: no-store`` (Django's :func:`~django.utils.cache.add_never_cache_headers`), as the page's
    answer that shows one, so no browser or proxy cache keeps it."""
    response = Response(body, status=status)
    add_never_cache_headers(response)
    return response
