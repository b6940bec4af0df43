"""Plans as code (``manage.py quota_plans``): an export applied to an empty database gives the same plans back,
applying twice changes nothing, a dry run changes nothing, a bad file is refused naming its line, and what is
applied is what the throttle enforces next."""

from __future__ import annotations

import re
import sys
from decimal import Decimal
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from plans.models import CostBudget, EndpointLimit, GroupPlan, LimitOverride, PeriodQuota, Plan, Subscription
from tests.factories import EndpointLimitFactory, PlanFactory, SubscriptionFactory, issue_key

pytestmark = pytest.mark.django_db

PING = "/api/demo/ping"


@pytest.fixture
def plans():
    """Two plans using most fields (a default one, decimals, methods, countries, a leaky bucket, a period quota,
    budgets) and a group plan."""
    free = PlanFactory(slug="free", name="Free", is_default=True, description="Try it.\nNo card needed.")
    pro = PlanFactory(slug="pro", name="Pro", monthly_price=Decimal("49.90"), priority=5, ban_threshold=20)
    EndpointLimitFactory(
        plan=free, name="global", rates="10/s; 100/min", algorithm="token_bucket", burst=20, price=Decimal("0.000001")
    )
    EndpointLimitFactory(plan=pro, name="global", rates="100/min", algorithm="token_bucket")
    EndpointLimitFactory(
        plan=pro, name="writes", path_prefix="/api/", methods="POST, PUT", countries="CN, RU", rates="20/min",
        algorithm="leaky_bucket", max_delay=0.25, price=Decimal("0.000125"), refund_on_error=True,
    )  # fmt: skip
    PeriodQuota.objects.create(plan=pro, name="monthly", period="month", units=100_000)
    CostBudget.objects.create(plan=pro, period="day", amount=Decimal("12.50"), currency="EUR")
    CostBudget.objects.create(plan=pro, period="month", amount=Decimal("300"), currency="EUR")
    GroupPlan.objects.create(group=Group.objects.create(name="partners"), plan=pro)
    return {"free": free, "pro": pro}


def quota_plans(*args: str) -> str:
    """What ``manage.py quota_plans <args>`` prints."""
    out = StringIO()
    call_command("quota_plans", *args, stdout=out)
    return out.getvalue()


def write(tmp_path: Path, text: str, name: str = "plans.yaml") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def empty_the_database() -> None:
    GroupPlan.objects.all().delete()
    Group.objects.all().delete()
    Plan.objects.all().delete()


@pytest.mark.parametrize("file_format", ["yaml", "json"])
def test_an_export_applied_to_an_empty_database_gives_the_same_plans(plans, tmp_path, file_format):
    """Exported, emptied, applied: the next export is the same text, keyed by slugs and names, never ids."""
    exported = quota_plans("export", "--format", file_format)
    path = write(tmp_path, exported, f"plans.{file_format}")
    empty_the_database()

    out = quota_plans("apply", path)

    assert "created  plan pro" in out
    assert "created  group plan partners (plan pro)" in out
    assert quota_plans("export", "--format", file_format) == exported
    assert not re.search(r"\bid\b|_id\b", exported)  # no database id in the file
    assert EndpointLimit.objects.get(name="writes").price == Decimal("0.000125")
    assert EndpointLimit.objects.get(name="global", plan__slug="free").price == Decimal("0.000001")


def test_a_yaml_export_writes_decimals_as_written():
    """A price of a millionth is 0.000001 in the file, as in the admin (never 1.0e-06), and a whole amount has
    no decimals."""
    EndpointLimitFactory(plan=PlanFactory(slug="free", monthly_price=Decimal("10.00")), price=Decimal("0.000001"))
    exported = quota_plans("export")
    assert "    price: 0.000001\n" in exported
    assert "  monthly_price: 10\n" in exported


def test_an_export_is_sorted_by_natural_keys(plans):
    """Plans by slug, limits by name: a change to a price or a priority moves no line of the file."""
    exported = quota_plans("export")
    assert exported.index("slug: free") < exported.index("slug: pro")
    assert exported.index("- name: global\n    scope: ''") < exported.index("- name: writes")


def test_applying_twice_changes_nothing_the_second_time(plans, tmp_path, django_capture_on_commit_callbacks):
    """The second apply of a file prints "No changes." and saves nothing (no rules change is announced)."""
    path = write(tmp_path, quota_plans("export").replace("rates: 100/min", "rates: 200/min"))
    with django_capture_on_commit_callbacks() as callbacks:
        assert 'rates: "100/min" -> "200/min"' in quota_plans("apply", path)
    assert callbacks  # once committed, the change is announced to every process, as an admin edit is

    with django_capture_on_commit_callbacks() as callbacks:
        out = quota_plans("apply", path)

    assert out == "No changes.\n"
    assert callbacks == []


def test_a_dry_run_prints_the_diff_and_changes_nothing(plans, tmp_path):
    """--dry-run shows each created, changed and deleted object with old -> new values, and writes nothing."""
    before = quota_plans("export")
    edited = before.replace("rates: 100/min", "rates: 200/min").replace("monthly_price: 49.9", "monthly_price: 59")
    edited = edited.replace("  period_quotas:\n  - name: monthly", "  period_quotas:\n  - name: yearly")
    path = write(tmp_path, edited)

    out = quota_plans("apply", path, "--dry-run")

    assert "changed  plan pro\n           monthly_price: 49.9 -> 59\n" in out
    assert 'changed  limit pro/global\n           rates: "100/min" -> "200/min"\n' in out
    assert "deleted  period quota pro/monthly (not in the file)" in out
    assert "created  period quota pro/yearly" in out
    assert out.endswith("Dry run: 4 change(s) not applied.\n")
    assert quota_plans("export") == before


def test_plans_absent_from_the_file_are_kept_unless_pruned(plans, tmp_path):
    """A plan the file leaves out is reported and kept; --prune deletes it, unless subscriptions are on it."""
    text = quota_plans("export")
    path = write(tmp_path, text[: text.index("- slug: pro")] + "group_plans: []\n")

    out = quota_plans("apply", path)
    assert "kept     plan pro (not in the file; --prune deletes it)" in out
    assert "kept     group plan partners (not in the file; --prune deletes it)" in out
    assert Plan.objects.filter(slug="pro").exists()

    SubscriptionFactory(plan=plans["pro"])
    with pytest.raises(CommandError, match=r"plan pro: not in the file, but 1 subscription\(s\) are on it"):
        quota_plans("apply", path, "--prune")
    assert Plan.objects.filter(slug="pro").exists()

    Subscription.objects.all().delete()
    out = quota_plans("apply", path, "--prune")
    assert "deleted  plan pro" in out
    assert not Plan.objects.filter(slug="pro").exists()
    assert not GroupPlan.objects.exists()


def test_a_limit_left_out_is_deleted_with_the_overrides_of_it(plans, tmp_path):
    """Within a plan of the file, the file is the whole plan: a limit it leaves out goes, and the diff says that
    the subscriptions' overrides of it go too."""
    writes = EndpointLimit.objects.get(name="writes")
    LimitOverride.objects.create(subscription=SubscriptionFactory(plan=plans["pro"]), limit=writes, unlimited=True)
    text = quota_plans("export")
    start = text.index("  - name: writes")
    path = write(tmp_path, text[:start] + text[text.index("  period_quotas:", start) :])

    out = quota_plans("apply", path)

    assert "deleted  limit pro/writes (not in the file; with 1 subscription override(s) of it)" in out
    assert not LimitOverride.objects.exists()


def test_the_default_and_the_currency_move_in_one_apply(plans, tmp_path):
    """Moving the default to another plan, or a plan's budgets to another currency, is one apply: the models'
    checks see the file's end state, not a half-applied one."""
    text = quota_plans("export").replace("is_default: true", "is_default: maybe")
    text = text.replace("is_default: false", "is_default: true").replace("is_default: maybe", "is_default: false")
    path = write(tmp_path, text.replace("currency: EUR", "currency: USD"))

    quota_plans("apply", path)

    assert Plan.objects.get(is_default=True).slug == "pro"
    assert set(CostBudget.objects.values_list("currency", flat=True)) == {"USD"}


GOOD = """\
plans:
- slug: free
  name: Free
  limits:
  - name: global
    rates: 10/min
group_plans:
- group: testers
  plan: free
"""


@pytest.mark.parametrize(
    ("edit", "line", "message"),
    [
        (("rates: 10/min", "rates: 10/mnute"), 6, "plans[0].limits[0].rates: Unknown time unit 'mnute' in '10/mnute'"),
        (("rates: 10/min", "rate: 10/min"), 6, "plans[0].limits[0].rate: unknown field (did you mean 'rates'?)"),
        (("plan: free", "plan: gold"), 9, 'group_plans[0].plan: no plan "gold" in this file (its plans: free)'),
        (("name: Free", "name: Free\n  priority: high"), 4, 'plans[0].priority: "high" is not a whole number'),
        (
            ("  limits:\n  - name: global\n    rates: 10/min", "  limits: 3"),
            4,
            'plans[0].limits: expected a list of limits, got "3"',
        ),
        (
            ("name: global", "name: [global"),
            6,
            "not valid YAML: expected ',' or ']', but got ':' (while parsing a flow sequence from line 5)",
        ),
        (("name: Free", "name: ''"), 3, "plans[0].name: This field cannot be blank."),
    ],
    ids=["bad rate", "unknown field", "unknown plan", "wrong type", "not a list", "YAML syntax", "model check"],
)
def test_a_bad_file_is_refused_naming_the_line_and_nothing_changes(tmp_path, edit, line, message):
    """Every problem is a CommandError line ``<file>:<line>: <where>: <why>``; the database is left as it was."""
    path = write(tmp_path, GOOD.replace(*edit))
    with pytest.raises(CommandError) as refused:
        quota_plans("apply", path)
    assert f"\n{path}:{line}: {message}" in str(refused.value)
    assert not Plan.objects.exists()
    assert not Group.objects.exists()


def test_every_problem_of_a_file_is_named_at_once(tmp_path):
    """The models' problems in different plans are all reported by one run, in line order (as are the file's own
    problems, which are reported before the models see anything)."""
    text = GOOD.replace("rates: 10/min", "rates: 0/min").replace(
        "group_plans:", "- slug: pro\n  ban_window: 0\ngroup_plans:"
    )
    with pytest.raises(CommandError) as refused:
        quota_plans("apply", write(tmp_path, text))
    lines = str(refused.value).splitlines()
    assert lines[0].endswith("plans.yaml: 3 problem(s), nothing changed:")
    assert lines[1].endswith(":6: plans[0].limits[0].rates: The count in '0/min' must be at least 1.")
    assert lines[2].endswith(":7: plans[1].name: This field cannot be blank.")
    assert lines[3].endswith(":8: plans[1].ban_window: Ensure this value is greater than or equal to 1.")


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ('{"plans": [\n  {"slug": "free",\n   "name": "Free",}\n]}\n', 3, "not valid JSON: Expecting property name"),
        ('{"plans": [\n  {"slug": "free",\n   "name": "Free",\n   "is_default": "yes"}\n]}\n', 4,
         'plans[0].is_default: "yes" is not true or false'),
        ('{"plans": [\n  {"slug": "free", "name": "A",\n   "name": "B"}\n]}\n', 3,
         "name: given twice (first on line 2)"),
    ],
    ids=["syntax", "wrong type", "key twice"],
)  # fmt: skip
def test_a_json_file_is_refused_naming_the_line(tmp_path, text, line, message):
    path = write(tmp_path, text, "plans.json")
    with pytest.raises(CommandError) as refused:
        quota_plans("apply", path)
    assert f"\n{path}:{line}: {message}" in str(refused.value)


def test_json_needs_no_yaml(plans, tmp_path, monkeypatch):
    """Without PyYAML (the [yaml] extra), JSON files export and apply, and YAML is a CommandError saying what
    to install."""
    monkeypatch.setitem(sys.modules, "yaml", None)  # `import yaml` now raises ImportError
    exported = quota_plans("export", "--format", "json")
    assert quota_plans("apply", write(tmp_path, exported, "plans.json")) == "No changes.\n"
    with pytest.raises(CommandError, match=r"PyYAML is not installed: pip install 'django-quota-platform\[yaml\]'"):
        quota_plans("export")


def test_an_unreadable_file_is_a_command_error(tmp_path):
    with pytest.raises(CommandError, match=r"Cannot read .*missing\.yaml: No such file or directory"):
        quota_plans("apply", str(tmp_path / "missing.yaml"))


def test_the_throttle_enforces_what_was_applied(tmp_path):
    """A key's next request after an apply is decided on the file's new rates (the saves announce the rules
    change, as the admin's do)."""
    path = write(tmp_path, GOOD)
    quota_plans("apply", path)
    key = issue_key(SubscriptionFactory(plan=Plan.objects.get(slug="free")))
    client = APIClient()
    assert client.get(PING, HTTP_X_API_KEY=key)["RateLimit-Policy"] == '"global";q=10;w=60'

    quota_plans("apply", write(tmp_path, GOOD.replace("rates: 10/min", "rates: 3/min")))

    assert client.get(PING, HTTP_X_API_KEY=key)["RateLimit-Policy"] == '"global";q=3;w=60'
    # The limit was changed, not replaced: its counter holds the two requests already made.
    assert [client.get(PING, HTTP_X_API_KEY=key).status_code for _ in range(2)] == [200, 429]


def test_the_getting_started_example_applies(tmp_path):
    """The plans file shown in docs/getting-started.md is one `apply` takes as it stands."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "getting-started.md").read_text(encoding="utf-8")
    section = page[page.index("## Plans in version control") :]
    example = section[section.index("```yaml\n") + len("```yaml\n") : section.index("```\n", section.index("```yaml"))]

    out = quota_plans("apply", write(tmp_path, example))

    assert "created  group plan partners (plan pro)" in out
    assert EndpointLimit.objects.get(name="search").algorithm == "sliding_window_counter"
    assert CostBudget.objects.get(plan__slug="pro").amount == Decimal("20")
