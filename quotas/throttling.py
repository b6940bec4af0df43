"""The public import path of the DRF throttle: ``quotas.throttling.QuotaThrottle`` (see :mod:`quotas.drf`)."""

from .drf.throttling import QuotaThrottle

__all__ = ["QuotaThrottle"]
