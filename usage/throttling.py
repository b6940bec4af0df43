"""The usage API's throttle: :class:`quotas.drf.housekeeping.HousekeepingThrottle` (see there), under the name
the usage API's views and projects know it by."""

from quotas.drf.housekeeping import USAGE_SCOPE
from quotas.drf.housekeeping import HousekeepingThrottle as UsageAPIThrottle

__all__ = ["USAGE_SCOPE", "UsageAPIThrottle"]
