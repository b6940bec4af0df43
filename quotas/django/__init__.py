"""Quotas for plain Django views, outside DRF: a decorator and a path-prefix middleware.

- :func:`quotas.django.decorators.quota_limited` limits one view
  (``@quota_limited(scope="login", rate="5/min")``);
- :class:`quotas.django.middleware.PathQuotaMiddleware` limits every view
  under the prefixes of ``QUOTAS['PATH_LIMITS']`` (a webhook receiver).

Both ask :mod:`quotas.guard`'s :func:`~quotas.django.guard.check`, which
identifies the client, gathers the plan's windows and calls
:func:`quotas.admission.admit` like :class:`~quotas.drf.throttling.QuotaThrottle`
does; a refusal is the same problem+json with the same headers.
"""
