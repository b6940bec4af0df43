"""The public import path of the DRF throttle: ``quotas.drf.throttling.QuotaThrottle`` (see :mod:`quotas.drf`)."""

from quotas.drf.throttling import QuotaThrottle

__all__ = ["QuotaThrottle"]
