"""Each reusable app carries what it uses, the pins of requirements.txt satisfy the package's requirements,
the licence is the same everywhere, and the sdist and the wheel hold the apps and nothing else."""

from __future__ import annotations

import ast
import json
import re
import tarfile
import tomllib
import zipfile
from pathlib import Path

import django
import pytest
import rest_framework
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
APPS = ("quotas", "plans", "usage", "adaptive", "dashboard", "notifications", "console")
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
#: Where templates an app extends or includes may come from besides itself: Django's and DRF's own.
FRAMEWORK_TEMPLATES = [
    *(Path(django.__file__).parent / "contrib").glob("*/templates"),
    Path(rest_framework.__file__).parent / "templates",
]
TEMPLATE_NAMES = re.compile(
    r"""(?:render\(\s*request,\s*|TemplateResponse\(\s*request,\s*|template_name\s*=\s*|{%\s*(?:extends|include)\s+)"""
    r"""["']([^"']+\.html)["']"""
)
STATIC_NAMES = re.compile(r"""{%\s*static\s+["']([^"']+)["']""")


#: Extras the example project does not run (it serves no GraphQL, exports no traces and has no country
#: database): pinned in requirements-dev.txt, which the tests install, not in requirements.txt, which `make run`
#: installs.
DEV_ONLY_EXTRAS = ("graphene", "strawberry", "opentelemetry", "geoip")


def pins(files: tuple[str, ...] = ("requirements.txt",)) -> dict[str, str]:
    """The ``name==version`` lines of ``files`` (requirements.txt's by default), by lower-case name."""
    found = {}
    for name in files:
        for line in (ROOT / name).read_text(encoding="utf-8").splitlines():
            line = line.split("#", 1)[0].strip()
            if line and not line.startswith("-"):  # not an option nor an included file
                requirement = Requirement(line)
                (spec,) = requirement.specifier
                found[requirement.name.lower()] = spec.version
    return found


def package_requirements(dev_only: bool = False) -> list[Requirement]:
    """The core requirements and every extra's but :data:`DEV_ONLY_EXTRAS` (with ``dev_only``: theirs alone),
    except the extras that name this package itself."""
    project = PYPROJECT["project"]
    extras = project["optional-dependencies"]
    if dev_only:
        listed = [r for name in DEV_ONLY_EXTRAS for r in extras[name]]
    else:
        listed = [*project["dependencies"], *(r for n, e in extras.items() if n not in DEV_ONLY_EXTRAS for r in e)]
    return [Requirement(r) for r in listed if Requirement(r).name != project["name"]]


@pytest.mark.parametrize("requirement", package_requirements(), ids=str)
def test_requirements_txt_pins_every_package_requirement_within_its_range(requirement: Requirement):
    """`make run` and the tests install requirements.txt: its pins are a version the package accepts."""
    pinned = pins().get(requirement.name.lower())
    assert pinned is not None, f"{requirement.name} is a requirement of the package but not pinned in requirements.txt"
    assert requirement.specifier.contains(pinned), f"{requirement.name}=={pinned} is outside {requirement.specifier}"


@pytest.mark.parametrize("requirement", package_requirements(dev_only=True), ids=str)
def test_requirements_dev_txt_pins_the_test_only_extras_within_their_range(requirement: Requirement):
    """The GraphQL and OpenTelemetry extras, which only the tests install, are pinned in requirements-dev.txt,
    and `all` does not ask for them."""
    pinned = pins(("requirements-dev.txt",)).get(requirement.name.lower())
    assert pinned is not None, f"{requirement.name} is in a test-only extra but not pinned in requirements-dev.txt"
    assert requirement.specifier.contains(pinned), f"{requirement.name}=={pinned} is outside {requirement.specifier}"
    assert not any(name in PYPROJECT["project"]["optional-dependencies"]["all"][0] for name in DEV_ONLY_EXTRAS)


def test_the_licence_is_mit_everywhere():
    """pyproject.toml, LICENSE and package.json say the same licence; Chart.js's notice is next to it."""
    assert PYPROJECT["project"]["license"] == "MIT"
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")
    assert json.loads((ROOT / "package.json").read_text(encoding="utf-8"))["license"] == "MIT"
    vendor = ROOT / "dashboard/static/dashboard/vendor"
    assert "MIT License" in (vendor / "chart.js.LICENSE").read_text(encoding="utf-8")
    assert {p.name for p in vendor.iterdir()} == {"chart.umd.min.js", "chart.js.LICENSE"}


@pytest.mark.parametrize("app", APPS)
def test_every_template_and_static_file_an_app_uses_is_inside_that_app(app: str):
    """A project that installs only some of the apps never meets TemplateDoesNotExist or a missing
    static file: what an app renders, extends, includes or links is in its own folder (or Django's)."""
    missing = []
    for source in (ROOT / app).rglob("*"):
        if source.suffix not in {".py", ".html"}:
            continue
        text = source.read_text(encoding="utf-8")
        for name in TEMPLATE_NAMES.findall(text):
            places = [ROOT / app / "templates", *FRAMEWORK_TEMPLATES]
            if not any((place / name).is_file() for place in places):
                missing.append(f"{source.relative_to(ROOT)}: template {name}")
        for name in STATIC_NAMES.findall(text):
            if not (ROOT / app / "static" / name).is_file():
                missing.append(f"{source.relative_to(ROOT)}: static {name}")
    assert missing == []


def newest_cell() -> dict[str, str]:
    """What noxfile.py's newest cell pins (its ``NEWEST``), read without importing nox."""
    tree = ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8"))
    (value,) = [
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["NEWEST"]
    ]
    return ast.literal_eval(value)


def test_the_django_classifiers_are_the_versions_ci_tests():
    """The classifiers name the feature releases of Django that CI runs: requirements.txt's (`make test`),
    the lower bound of the package's range (the oldest cell of `make matrix`) and the newest cell's."""
    (requirement,) = [r for r in package_requirements() if r.name == "Django"]
    (floor,) = [spec.version for spec in requirement.specifier if spec.operator == ">="]
    tested = [pins()["django"], floor, newest_cell()["Django"]]
    expected = {"{}.{}".format(*Version(v).release[:2]) for v in tested}
    prefix = "Framework :: Django :: "
    declared = {c.removeprefix(prefix) for c in PYPROJECT["project"]["classifiers"] if c.startswith(prefix)}
    assert declared == expected


def app_files() -> set[str]:
    """Every file of the six apps in this checkout (bytecode aside), relative to the checkout."""
    return {
        p.relative_to(ROOT).as_posix()
        for app in APPS
        for p in (ROOT / app).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }


@pytest.mark.slow  # builds the sdist and the wheel in real processes
def test_the_sdist_holds_the_apps_and_what_builds_them_and_nothing_else(dists: tuple[Path, Path]):
    """Every file of the apps (Python, migrations, Lua, templates, static files) and the files the wheel is
    built from; no tests/, bench/, demo/, config/, docs/, CI or npm files."""
    sdist, _ = dists
    top = sdist.name.removesuffix(".tar.gz")
    with tarfile.open(sdist) as archive:
        names = {m.name.removeprefix(f"{top}/") for m in archive.getmembers() if m.isfile()}
    # setuptools' own: the metadata it writes, and the egg-info it builds the wheel from.
    written = {"PKG-INFO", "setup.cfg"} | {n for n in names if n.startswith("django_quota_platform.egg-info/")}
    assert names - written == app_files() | {"pyproject.toml", "MANIFEST.in", "README.md", "LICENSE"}
    assert {"quotas/contract/lua/decide.lua", "quotas/py.typed", "dashboard/templates/dashboard/base.html"} <= names
    assert "dashboard/static/dashboard/vendor/chart.js.LICENSE" in names


@pytest.mark.slow  # builds the sdist and the wheel in real processes
def test_the_wheel_built_from_the_sdist_holds_the_apps_and_their_metadata_only(dists: tuple[Path, Path]):
    """The wheel is the apps' files (Lua, templates and static files included) and its .dist-info, with the
    licences and the project's URLs."""
    _, wheel = dists
    info = wheel.name.removesuffix("-py3-none-any.whl") + ".dist-info"
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = archive.read(f"{info}/METADATA").decode()
    assert {n for n in names if not n.startswith(f"{info}/")} == app_files()
    assert {"quotas/contract/lua/decide.lua", "quotas/py.typed", "dashboard/templates/dashboard/base.html"} <= names
    assert {f"{info}/licenses/LICENSE", f"{info}/licenses/dashboard/static/dashboard/vendor/chart.js.LICENSE"} <= names
    urls = dict(re.findall(r"^Project-URL: ([^,]+), (\S+)$", metadata, re.M))
    assert set(urls) == {"Homepage", "Documentation", "Source", "Changelog", "Issues"}
