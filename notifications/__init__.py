"""Notifications for customers: signed webhooks and e-mail when a budget crosses a threshold (docs/notifications.md)."""
