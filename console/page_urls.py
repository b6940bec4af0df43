"""The customer's page: mount with ``path("usage/account/", include("console.page_urls"))``."""

from django.contrib.auth import views as auth_views
from django.urls import path

from .checks import require_apps_it_reads

require_apps_it_reads()  # the views below import the models of plans and notifications

from .pages import caps, contacts, keys, page, webhooks  # noqa: E402  (after the check: say which app is missing)

app_name = "console-page"
urlpatterns = [
    path("", page.index, name="index"),
    path("sign-in/", page.SignInView.as_view(), name="sign-in"),
    path("sign-out/", auth_views.LogoutView.as_view(next_page="console-page:sign-in"), name="sign-out"),
    path("<int:subscription_id>/", page.subscription, name="subscription"),
    path("<int:subscription_id>/cap", caps.cap, name="cap"),
    path("<int:subscription_id>/thresholds", caps.thresholds, name="thresholds"),
    # API keys
    path("<int:subscription_id>/keys", keys.create, name="key-create"),
    path("<int:subscription_id>/keys/<int:key_id>/revoke", keys.revoke, name="key-revoke"),
    path("<int:subscription_id>/keys/<int:key_id>/roll", keys.roll, name="key-roll"),
    path("<int:subscription_id>/keys/<int:key_id>/limits", keys.limits, name="key-limits"),
    # webhooks
    path("<int:subscription_id>/webhooks", webhooks.register, name="webhook-register"),
    path("<int:subscription_id>/webhooks/<int:endpoint_id>/active", webhooks.active, name="webhook-active"),
    path("<int:subscription_id>/webhooks/<int:endpoint_id>/delete", webhooks.delete, name="webhook-delete"),
    path("<int:subscription_id>/webhooks/<int:endpoint_id>/test", webhooks.send_test, name="webhook-test"),
    path(
        "<int:subscription_id>/webhooks/<int:endpoint_id>/roll-secret", webhooks.roll_secret, name="webhook-roll-secret"
    ),
    path("<int:subscription_id>/deliveries/<int:delivery_id>/resend", webhooks.resend, name="delivery-resend"),
    # e-mail contacts
    path("<int:subscription_id>/contacts", contacts.add, name="contact-add"),
    path("<int:subscription_id>/contacts/<int:contact_id>/delete", contacts.delete, name="contact-delete"),
    path("confirm/", contacts.confirm, name="confirm"),  # a confirmation e-mail's link: no sign-in
]
