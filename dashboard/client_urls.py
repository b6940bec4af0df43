from django.urls import path

from . import client_views

app_name = "usage-page"
urlpatterns = [
    path("", client_views.sign_in, name="sign-in"),
    path("<str:token>/", client_views.page, name="page"),
]
