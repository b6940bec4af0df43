"""The public import path of the middleware, ``quotas.middleware.QuotaHeadersMiddleware``.

See :mod:`quotas.http.middleware`.
"""

from quotas.http.middleware import QuotaHeadersMiddleware

__all__ = ["QuotaHeadersMiddleware"]
