"""graphene-django's ``GraphQLView``, limited by its queries' complexity.

Installed with the ``graphene`` extra (``pip install django-quota-platform[graphene]``). In urls.py::

    path("graphql", csrf_exempt(QuotaGraphQLView.as_view(schema=schema, quota_scope="graphql")))
"""

from graphene_django.views import GraphQLView

from quotas.graphql.views import QuotaGraphQLMixin


class QuotaGraphQLView(QuotaGraphQLMixin, GraphQLView):
    """graphene-django's view whose requests spend their complexity (see :mod:`quotas.graphql.gate`)."""
