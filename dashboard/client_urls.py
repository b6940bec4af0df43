from django.urls import path

from .checks import require_apps_it_reads

require_apps_it_reads()  # the views below import the models of plans, usage and adaptive

from . import client_views  # noqa: E402  (after the check: say which app is missing, not which model failed)

app_name = "usage-page"
urlpatterns = [
    path("", client_views.sign_in, name="sign-in"),
    path("me/", client_views.page, name="page"),
    path("sign-out/", client_views.sign_out, name="sign-out"),
]
