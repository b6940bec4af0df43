"""Quotas for plain Django views, outside DRF: a decorator and a path-prefix middleware.

- :func:`quotas.django.decorators.quota_limited` limits one view
  (``@quota_limited(scope="login", rate="5/min")``);
- :class:`quotas.django.middleware.PathQuotaMiddleware` limits every view
  under the prefixes of ``QUOTAS['PATH_LIMITS']`` (a webhook receiver).

Both answer through :mod:`quotas.django.respond`'s gate (:func:`~quotas.django.respond.gate` and
:func:`~quotas.django.respond.agate`: check, then refuse or respond; GraphQL's views use it too), which asks
:func:`quotas.decide.check` as :class:`~quotas.drf.throttling.QuotaThrottle` does; a refusal is the same
problem+json with the same headers.
"""
