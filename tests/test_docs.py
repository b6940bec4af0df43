"""The documentation site documents what a user configures: every environment variable the code reads."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Read by the code, but set by the operating system or Django's own conventions.
SYSTEM = {"PATH", "HOME", "TMPDIR", "DJANGO_SETTINGS_MODULE"}
_READS = re.compile(
    r"""(?:env\.(?:str|int|float|bool|list)\(|os\.environ(?:\.get)?[\[(]|os\.getenv\(|environ\.setdefault\()\s*["']([A-Z][A-Z0-9_]+)["']"""
)


def variables_read() -> set[str]:
    names: set[str] = set()
    for folder in ("config", "quotas", "plans", "usage", "adaptive", "dashboard", "demo"):
        for path in (ROOT / folder).rglob("*.py"):
            names |= set(_READS.findall(path.read_text(encoding="utf-8")))
    return names - SYSTEM


def test_every_environment_variable_is_in_the_docs():
    """Every variable the code reads is named in the first column of a table on one of the docs/ pages."""
    pages = "\n".join(path.read_text(encoding="utf-8") for path in sorted((ROOT / "docs").glob("*.md")))
    first_cells = re.findall(r"^\|([^|]*)\|", pages, flags=re.MULTILINE)
    documented = {name for cell in first_cells for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", cell)}
    read = variables_read()
    assert "USAGE_FLUSH_BATCH_DELAY" in read  # the scan finds what it must
    assert not read - documented, f"read by the code but not in the tables of docs/*.md: {sorted(read - documented)}"


_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """The anchor mkdocs (Python-Markdown's toc) and GitHub give a heading: lower case, punctuation dropped."""
    return re.sub(r"[\s]+", "-", re.sub(r"[^\w\s-]", "", heading.strip().lower()))


def test_the_readmes_links_resolve_in_the_repository():
    """Until the site is published, the README links to docs/ pages by relative paths that work on GitHub and
    in a clone: every such link names a file that exists, and every #anchor a heading on that page."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = [link for link in _LINK.findall(readme) if not link.startswith(("http://", "https://", "mailto:"))]
    assert len(links) > 10  # the scan finds what it must
    broken = []
    for link in links:
        path, _, anchor = link.partition("#")
        target = ROOT / path
        if not target.is_file():
            broken.append(link)
        elif anchor:
            headings = re.findall(r"^#+\s+(.+)$", target.read_text(encoding="utf-8"), flags=re.MULTILINE)
            if anchor not in {_slug(h) for h in headings}:
                broken.append(link)
    assert broken == []
    assert "readthedocs.io" not in readme  # a site that is not published yet


def test_the_testing_page_says_what_to_install_and_which_settings_the_tests_run_on():
    """Testing your project starts with what a new team lacks: the pip line (pytest, pytest-django, the memory
    extra), the test settings module and how pytest-django finds it (the settings and ini blocks are run by
    tests/test_memory_store_project.py)."""
    from tests.doc_blocks import doc_block

    install = doc_block("testing.md", "testing-install", language="sh")
    assert install.split()[:4] == ["pip", "install", "pytest", "pytest-django"]
    assert "django-quota-platform[memory]" in install
    assert 'QUOTAS = {**QUOTAS, "REDIS_URL": "memory://"}' in doc_block("testing.md", "testing-settings")
    assert "DJANGO_SETTINGS_MODULE = mysite.test_settings" in doc_block("testing.md", "testing-ini", language="ini")


def test_the_readme_opens_with_a_three_line_quick_start():
    """The README's first command block, before any other command and within its first 40 lines, is `make run`,
    `make test` and the curl to the demo API."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first = re.search(r"```sh\n(.*?)```", readme, re.DOTALL)
    assert first is not None
    assert readme[: first.start()].count("\n") < 40
    assert "make docs" not in readme[: first.start()]
    lines = first.group(1).strip().splitlines()
    assert [line.split("#")[0].split()[:2] for line in lines] == [["make", "run"], ["make", "test"], ["curl", "-i"]]
    assert lines[2].rstrip().endswith("http://127.0.0.1:8000/api/demo/ping")


def test_every_extra_of_all_is_named_in_the_readme_and_getting_started():
    """The extras lists a new team reads name every extra `[all]` installs (notifications and feeds included)."""
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    bundled = re.search(r"\[(.*)\]", extras["all"][0]).group(1).split(",")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = re.findall(r"^\| `\[(\w+)\]` \|", (ROOT / "docs" / "getting-started.md").read_text(), re.MULTILINE)
    for extra in bundled:
        assert f"`[{extra}]`" in readme, extra
        assert extra in table, extra


def test_the_dashboard_page_names_the_action_that_issues_keys():
    """Keys are issued by an action of the subscriptions list, and docs/dashboard.md says so by its name."""
    from django.contrib import admin

    from plans.models import Subscription

    action = admin.site.get_model_admin(Subscription).issue_api_key
    description = " ".join(str(action.short_description).split())
    page = " ".join((ROOT / "docs" / "dashboard.md").read_text(encoding="utf-8").split())
    assert f"*{description}*" in page
    assert "from the subscription page" not in page


def test_migrating_from_drf_adds_the_api_key_authentication_with_plans():
    """Migrating's DRF blocks, run in order on an empty project, end with plans installed and APIKeyAuthentication
    first, before DRF's default classes, as Getting started's existing-DRF block does."""
    from tests.doc_blocks import doc_block

    namespace: dict = {"INSTALLED_APPS": [], "MIDDLEWARE": []}
    for name in ("migrate-drf-before", "migrate-drf-after", "migrate-drf-plans"):
        exec(doc_block("migrating.md", name), namespace)  # the page's own settings lines, run as written
    assert "plans" in namespace["INSTALLED_APPS"]
    assert namespace["QUOTAS"]["RULES_BACKEND"] == "plans.rules.PlansRulesBackend"
    assert namespace["REST_FRAMEWORK"]["DEFAULT_AUTHENTICATION_CLASSES"] == [
        "quotas.drf.authentication.APIKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.BasicAuthentication",
    ]


def test_the_architecture_page_names_every_module_and_package_of_the_engine():
    """docs/architecture.md keeps up with the tree: each package of ``quotas`` by its folder, each module by its
    file name (a management command by the command's name)."""
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    package = ROOT / "quotas"
    unnamed = [
        str(path.relative_to(ROOT))
        for path in sorted(package.rglob("*.py"))
        if path.name != "__init__.py"
        and path.name not in page
        and not (path.parent.name == "commands" and f"`{path.stem}`" in page)
    ]
    unnamed += [
        str(folder.relative_to(ROOT))
        for folder in sorted(package.rglob("*"))
        if folder.is_dir() and folder.name != "__pycache__" and f"{folder.name}/" not in page
    ]
    assert not unnamed, f"not named in docs/architecture.md: {unnamed}"
