from django.urls import path

from . import client_views

app_name = "usage-page"
urlpatterns = [
    path("", client_views.sign_in, name="sign-in"),
    path("me/", client_views.page, name="page"),
    path("sign-out/", client_views.sign_out, name="sign-out"),
]
