"""The customer's page: mount with ``path("usage/account/", include("console.page_urls"))``."""

from django.contrib.auth import views as auth_views
from django.urls import path

from . import pages

app_name = "console-page"
urlpatterns = [
    path("", pages.index, name="index"),
    path("sign-in/", pages.SignInView.as_view(), name="sign-in"),
    path("sign-out/", auth_views.LogoutView.as_view(next_page="console-page:sign-in"), name="sign-out"),
    path("<int:subscription_id>/", pages.subscription, name="subscription"),
    path("<int:subscription_id>/cap", pages.cap, name="cap"),
    path("<int:subscription_id>/thresholds", pages.thresholds, name="thresholds"),
]
