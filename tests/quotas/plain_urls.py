"""Plain Django views (no DRF) limited by quota_limited or PathQuotaMiddleware, for test_plain_views."""

from django.http import HttpResponse, JsonResponse
from django.urls import path
from django.views.decorators.csrf import csrf_exempt

from quotas.django.decorators import quota_limited


@csrf_exempt
@quota_limited(scope="login", rate="2/min")
def login(request):
    return HttpResponse("<form>sign in</form>")


@quota_limited(scope="search")
def search(request):
    return JsonResponse({"ok": True})


@quota_limited(scope="failing", rate="5/min")
def failing(request):
    return HttpResponse("broken", status=500)


@quota_limited(scope="raising", rate="5/min")
def raising(request):
    raise RuntimeError("the view failed")


@quota_limited(scope="alogin", rate="2/min")
async def async_login(request):
    return HttpResponse("async sign in")


@csrf_exempt
def webhook(request):
    return HttpResponse("received")


async def async_webhook(request):
    return HttpResponse("received async")


def free_view(request):
    return HttpResponse("not limited")


urlpatterns = [
    path("login/", login),
    path("search/", search),
    path("failing/", failing),
    path("raising/", raising),
    path("async-login/", async_login),
    path("hooks/receive", webhook),
    path("ahooks/receive", async_webhook),
    path("open/", free_view),
]
