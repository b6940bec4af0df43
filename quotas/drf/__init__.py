"""The Django REST framework adapter: throttle, API-key authentication, problem+json exception handler.

- :class:`quotas.drf.throttling.QuotaThrottle` (also importable as
  ``quotas.drf.throttling.QuotaThrottle``) for ``throttle_classes``;
- :class:`quotas.drf.authentication.APIKeyAuthentication`, first in
  ``DEFAULT_AUTHENTICATION_CLASSES``;
- :func:`quotas.drf.handlers.exception_handler` for ``EXCEPTION_HANDLER``, or
  :func:`quotas.drf.handlers.problem_response` inside a project's own handler.
"""
