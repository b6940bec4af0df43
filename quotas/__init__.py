"""Adaptive, cost-aware API quotas for Django REST framework.

The hot path lives in a few modules, read in this order:
``identity`` (who is calling) -> ``rules`` (what applies, from an in-process
snapshot) -> ``engine`` (one atomic Redis call) -> ``headers``/``problems``
(what the client sees), glued to DRF by ``throttling`` and ``middleware``.
"""

__version__ = "0.1.0"
