"""Quotas for plain Django views, outside DRF: a decorator and a path-prefix middleware.

- :func:`quotas.django.decorators.quota_limited` limits one view
  (``@quota_limited(scope="login", rate="5/min")``);
- :class:`quotas.django.middleware.PathQuotaMiddleware` limits every view
  under the prefixes of ``QUOTAS['PATH_LIMITS']`` (a webhook receiver).

Both answer through :mod:`quotas.django.respond` (:func:`~quotas.django.respond.respond` and
:func:`~quotas.django.respond.arespond`), which identifies the client, gathers the plan's windows and asks
:func:`quotas.decide.check` as :class:`~quotas.drf.throttling.QuotaThrottle` does; a refusal is the same
problem+json with the same headers.
"""
