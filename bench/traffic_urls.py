"""The project's URLs with the ping view under django-ratelimit's three stacked decorators (section 12's peer)."""

from django.urls import include, path

from demo.views import PingView

from .traffic_peers import stacked_ratelimits


@stacked_ratelimits
class RatelimitedPingView(PingView):
    """The demo's ping, limited by django-ratelimit instead of a throttle."""


urlpatterns = [
    path("api/demo/ping", RatelimitedPingView.as_view()),
    path("", include("config.urls")),
]
