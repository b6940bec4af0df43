"""The page's one translation of what :mod:`console.access` and the actions raise into the page's answers:
signed out, to the sign-in page (and back after it); a subscription (or an object of it) that is not the
caller's, a 404 as a missing one; a change a member or a key may not make, a 403 with the reason. Every view of a
subscription's page is wrapped by :func:`page_errors`, through :func:`console.pages.page.owner_action` for the
POSTs."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse

from ..errors import Missing, NotSignedIn, ReadOnly

#: Where a signed-out visitor is sent (``next``: where they were going).
SIGN_IN = "console-page:sign-in"

View = Callable[..., HttpResponse]


def page_errors(view: View) -> View:
    """``view``, with :class:`~console.errors.NotSignedIn` answered by a redirect to sign in (as Django's
    ``login_required`` does), :class:`~console.errors.Missing` (:class:`~console.errors.NoSuchSubscription`
    included) by Django's 404 and :class:`~console.errors.ReadOnly` by its 403, each with the message."""

    @wraps(view)
    def translated(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            return view(request, *args, **kwargs)
        except NotSignedIn:
            return redirect_to_login(request.get_full_path(), SIGN_IN)
        except Missing as exc:
            raise Http404(str(exc)) from None
        except ReadOnly as exc:
            raise PermissionDenied(str(exc)) from None

    return translated
