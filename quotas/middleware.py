"""The public import paths of the middleware: ``quotas.middleware.QuotaHeadersMiddleware`` (rate-limit headers,
settling after the view) and ``quotas.middleware.SignInThrottleMiddleware`` (refused sign-ins, trusted devices).

See :mod:`quotas.http.middleware` and :mod:`quotas.http.sign_in`.
"""

from quotas.http.middleware import QuotaHeadersMiddleware
from quotas.http.sign_in import SignInThrottleMiddleware

__all__ = ["QuotaHeadersMiddleware", "SignInThrottleMiddleware"]
