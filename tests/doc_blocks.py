"""The code blocks of the documentation that tests run as written: each between ``<!-- name:start -->`` and
``<!-- name:end -->`` on its page, in a list item or not."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs"


def doc_block(page: str | Path, name: str, language: str = "python") -> str:
    """The ```language block of ``page`` (a docs/ file name, or a path) between ``<!-- name:start/end -->``,
    dedented (a block in a list item is indented)."""
    path = page if isinstance(page, Path) else DOCS / page
    text = path.read_text(encoding="utf-8")
    found = re.search(rf"<!-- {name}:start -->\n *```{language}\n(.*?) *```\n *<!-- {name}:end -->", text, re.DOTALL)
    assert found, f"{path.name} has no ```{language} block between <!-- {name}:start --> and <!-- {name}:end -->"
    return textwrap.dedent(found.group(1))
