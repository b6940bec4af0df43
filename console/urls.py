"""Mount with ``path("api/v1/", include("console.urls"))``: the self-service API beside the usage API."""

from django.urls import path

from .checks import require_apps_it_reads

require_apps_it_reads()  # the views below import the models of plans and notifications

from .api import contacts, key_limits, keys, webhooks  # noqa: E402  (after the check: say which app is missing)
from .api.account import AccountView, AuditView  # noqa: E402  (after the check: say which app is missing)
from .api.caps import CapsView, CapView, ThresholdsView  # noqa: E402  (after the check: say which app is missing)

app_name = "console"
urlpatterns = [
    path("account", AccountView.as_view(), name="account"),
    path("subscriptions/<int:subscription_id>/audit", AuditView.as_view(), name="audit"),
    path("subscriptions/<int:subscription_id>/caps", CapsView.as_view(), name="caps"),
    path("subscriptions/<int:subscription_id>/caps/<str:period>", CapView.as_view(), name="cap"),
    path("subscriptions/<int:subscription_id>/thresholds", ThresholdsView.as_view(), name="thresholds"),
    # API keys
    path("subscriptions/<int:subscription_id>/keys", keys.KeyListView.as_view(), name="keys"),
    path(
        "subscriptions/<int:subscription_id>/keys/<int:key_id>/revoke",
        keys.KeyRevokeView.as_view(),
        name="key-revoke",
    ),
    path("subscriptions/<int:subscription_id>/keys/<int:key_id>/roll", keys.KeyRollView.as_view(), name="key-roll"),
    path(
        "subscriptions/<int:subscription_id>/keys/<int:key_id>/limits",
        key_limits.KeyLimitsView.as_view(),
        name="key-limits",
    ),
    # webhooks
    path("subscriptions/<int:subscription_id>/webhooks", webhooks.WebhookListView.as_view(), name="webhooks"),
    path(
        "subscriptions/<int:subscription_id>/webhooks/<int:endpoint_id>",
        webhooks.WebhookDetailView.as_view(),
        name="webhook",
    ),
    path(
        "subscriptions/<int:subscription_id>/webhooks/<int:endpoint_id>/test",
        webhooks.WebhookTestView.as_view(),
        name="webhook-test",
    ),
    path(
        "subscriptions/<int:subscription_id>/webhooks/<int:endpoint_id>/roll_secret",
        webhooks.WebhookRollSecretView.as_view(),
        name="webhook-roll-secret",
    ),
    path(
        "subscriptions/<int:subscription_id>/webhooks/<int:endpoint_id>/deliveries",
        webhooks.WebhookDeliveriesView.as_view(),
        name="webhook-deliveries",
    ),
    path(
        "subscriptions/<int:subscription_id>/deliveries/<int:delivery_id>",
        webhooks.DeliveryDetailView.as_view(),
        name="delivery",
    ),
    path(
        "subscriptions/<int:subscription_id>/deliveries/<int:delivery_id>/resend",
        webhooks.DeliveryResendView.as_view(),
        name="delivery-resend",
    ),
    # e-mail contacts
    path("subscriptions/<int:subscription_id>/contacts", contacts.ContactListView.as_view(), name="contacts"),
    path(
        "subscriptions/<int:subscription_id>/contacts/<int:contact_id>",
        contacts.ContactDetailView.as_view(),
        name="contact",
    ),
    path(
        "subscriptions/<int:subscription_id>/contacts/<int:contact_id>/resend_confirmation",
        contacts.ContactResendConfirmationView.as_view(),
        name="contact-resend-confirmation",
    ),
    path("contacts/confirm", contacts.ContactConfirmView.as_view(), name="contact-confirm"),
]
