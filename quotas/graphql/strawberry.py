"""strawberry's Django ``GraphQLView`` (strawberry-graphql-django's schemas), limited by its queries' complexity.

Installed with the ``strawberry`` extra (``pip install django-quota-platform[strawberry]``). In urls.py::

    path("graphql", csrf_exempt(QuotaGraphQLView.as_view(schema=schema, quota_scope="graphql")))
"""

from strawberry.django.views import GraphQLView

from quotas.graphql.views import QuotaGraphQLMixin


class QuotaGraphQLView(QuotaGraphQLMixin, GraphQLView):
    """strawberry's sync Django view whose requests spend their complexity (see :mod:`quotas.graphql.gate`)."""
