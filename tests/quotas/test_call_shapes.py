"""No call on a request's path is compiled to CALL_FUNCTION_EX by the number of its arguments.

Python 3.11 compiles a call whose positional arguments plus twice its keywords exceed 30 (a method's ``self``
counted) as a call with a tuple and a dict of them (CALL_FUNCTION_EX): ``Decision.__init__(self, ...)`` with 15
keywords cost about 6,000 instructions more than with 14 (docs/benchmark-history.md). A call that spreads ``*``
or ``**`` is one on purpose and is not counted here.
"""

from __future__ import annotations

import ast
import dis
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: The modules a decision goes through, from the throttle to the headers.
REQUEST_PATH = (
    "quotas/drf/throttling.py",
    "quotas/decide/hot_path.py",
    "quotas/store/guard.py",
    "quotas/store/allowances.py",
    "quotas/store/served.py",
    "quotas/store/redis_store.py",
    "quotas/store/transport.py",
    "quotas/store/replies.py",
    "quotas/store/decision.py",
    "quotas/observability/record.py",
    "quotas/http/headers.py",
    "quotas/http/middleware.py",
)
#: Python's own bound (CPython's compiler: STACK_USE_GUIDELINE).
MOST = 30


def test_the_bound_is_pythons():
    """14 keywords and ``self`` make a plain call; 15 make a call with a dict."""

    def opnames(keywords: int) -> set[str]:
        source = "f(x, " + ", ".join(f"a{i}=1" for i in range(keywords)) + ")"
        return {i.opname for i in dis.get_instructions(compile(source, "<call>", "eval"))}

    assert "CALL_FUNCTION_EX" not in opnames((MOST - 1) // 2)
    assert "CALL_FUNCTION_EX" in opnames((MOST - 1) // 2 + 1)


@pytest.mark.parametrize("module", REQUEST_PATH)
def test_no_call_on_the_request_path_takes_a_dict_of_its_keywords(module):
    tree = ast.parse((ROOT / module).read_text(encoding="utf-8"))
    too_many = [
        f"{module}:{node.lineno} {ast.unparse(node.func)}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and not any(isinstance(arg, ast.Starred) for arg in node.args)
        and all(keyword.arg is not None for keyword in node.keywords)
        and len(node.args) + 2 * len(node.keywords) > MOST
    ]
    assert not too_many, too_many
