"""strawberry's Django ``GraphQLView`` (strawberry-graphql-django's schemas), limited by its queries' complexity.

:class:`QuotaAsyncGraphQLView` is the same for strawberry's ``AsyncGraphQLView`` (under ASGI). Installed with
the ``strawberry`` extra (``pip install django-quota-platform[strawberry]``). In urls.py::

    path("graphql", csrf_exempt(QuotaGraphQLView.as_view(schema=schema, quota_scope="graphql")))
"""

from strawberry.django.views import AsyncGraphQLView, GraphQLView

from quotas.graphql.views import QuotaAsyncGraphQLMixin, QuotaGraphQLMixin


class QuotaGraphQLView(QuotaGraphQLMixin, GraphQLView):
    """strawberry's sync Django view whose requests spend their complexity (see :mod:`quotas.graphql.gate`)."""


# Django's View types dispatch as sync; an async view's (strawberry's own included) is a coroutine function.
class QuotaAsyncGraphQLView(QuotaAsyncGraphQLMixin, AsyncGraphQLView):  # type: ignore[misc]
    """strawberry's async Django view whose requests spend their complexity; the decision is awaited."""
