"""The customer's console: who may act on a subscription (owners and members), what they did (the audit log),
and the self-service API under ``/api/v1/`` that lets a subscription's owners manage it without staff."""
