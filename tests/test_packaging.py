"""Each reusable app carries what it uses, the pins of requirements.txt satisfy the package's requirements,
and the licence is the same everywhere."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import django
import pytest
import rest_framework
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
APPS = ("quotas", "plans", "usage", "adaptive", "dashboard")
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


def pins() -> dict[str, str]:
    """requirements.txt's ``name==version`` lines, by lower-case name."""
    found = {}
    for line in (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            requirement = Requirement(line)
            (spec,) = requirement.specifier
            found[requirement.name.lower()] = spec.version
    return found


def package_requirements() -> list[Requirement]:
    """The core requirements and every extra's, except the extras that name this package itself."""
    project = PYPROJECT["project"]
    listed = [*project["dependencies"], *(r for extra in project["optional-dependencies"].values() for r in extra)]
    return [Requirement(r) for r in listed if Requirement(r).name != project["name"]]


@pytest.mark.parametrize("requirement", package_requirements(), ids=str)
def test_requirements_txt_pins_every_package_requirement_within_its_range(requirement: Requirement):
    """`make run` and the tests install requirements.txt: its pins are a version the package accepts."""
    pinned = pins().get(requirement.name.lower())
    assert pinned is not None, f"{requirement.name} is a requirement of the package but not pinned in requirements.txt"
    assert requirement.specifier.contains(pinned), f"{requirement.name}=={pinned} is outside {requirement.specifier}"


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
