"""Quotas for GraphQL endpoints: a query spends its complexity, and one over the cap is refused.

- :mod:`quotas.graphql.complexity`: a document's complexity (fields counted by depth), graphql-core only;
- :mod:`quotas.graphql.operations`: the operations one HTTP request asks for (and a fallback reading of them);
- :mod:`quotas.graphql.gate`: the bounds, the cap, the service's decision, the answer;
- :mod:`quotas.graphql.responses`: refusals in GraphQL's ``errors`` shape, with the REST refusal's headers;
- :mod:`quotas.graphql.csrf`: CSRF checked for a signed-in browser's request, not for an API key client's;
- :mod:`quotas.graphql.views`: the ``dispatch`` every library's view is given;
- :mod:`quotas.graphql.graphene` and :mod:`quotas.graphql.strawberry`: the views, each reading a request with
  its library's own parsing and guarding its execution (extras ``graphene`` and ``strawberry``).

Nothing here is imported by the rest of ``quotas``: a project without GraphQL never loads it.
"""
