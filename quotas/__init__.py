"""Adaptive, cost-aware API quotas for Django REST framework.

One decision, read top to bottom: a front door (``drf.throttling``,
``django.decorators``, ``django.middleware``) builds the request's facts ->
``service`` (the one decision service) -> ``identity`` (who is calling) ->
``rules`` (what applies, from the ``runtime``'s in-process snapshot) ->
``store`` (one atomic Redis call, behind its guard) -> ``problems`` and
``http.headers`` (what the client sees). The layers are written down in
``tests/test_layout.py``.
"""

__version__ = "0.1.0"
