"""The API reference page's entries, written from the public names' signatures and docstrings.

docs/api.md holds one entry per name of ``quotas.api.__all__`` between its
``<!-- api reference:start -->`` and ``<!-- api reference:end -->`` lines;
``python -m config.api_docs`` (``make api-docs``) rewrites them, and
tests/quotas/test_api_docs.py fails while they differ, so the reference and
the code cannot disagree.
"""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path

#: The API reference page of the documentation site (mkdocs.yml).
API_PAGE = Path(__file__).resolve().parent.parent / "docs" / "api.md"
START, END = "<!-- api reference:start -->", "<!-- api reference:end -->"
_BLOCK = re.compile(re.escape(START) + r"\n.*?" + re.escape(END), re.DOTALL)


def _signature(obj: object) -> str:
    """``(name: type = default, ...) -> type``, with the annotations as written (no quotes around them)."""
    try:
        signature = inspect.signature(obj)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return ""
    parts, star = [], False
    for param in signature.parameters.values():
        if param.kind is param.KEYWORD_ONLY and not star:
            parts.append("*")
            star = True
        text = param.name
        if param.annotation is not param.empty:
            text += f": {_annotation(param.annotation)}"
        if param.default is not param.empty:
            text += f" = {param.default!r}"
        parts.append(text)
    returns = signature.return_annotation
    tail = "" if returns is signature.empty or inspect.isclass(obj) else f" -> {_annotation(returns)}"
    return f"({', '.join(parts)}){tail}"


def _annotation(annotation: object) -> str:
    return annotation if isinstance(annotation, str) else getattr(annotation, "__name__", repr(annotation))


def entry(name: str, obj: object) -> str:
    """One name's entry: a heading, its signature, its docstring (as written, reST roles left as text)."""
    kind = "class" if inspect.isclass(obj) else "async def" if inspect.iscoroutinefunction(obj) else "def"
    doc = inspect.cleandoc(obj.__doc__ or "").replace(":func:", "").replace(":class:", "").replace(":mod:", "")
    doc = doc.replace(":data:", "").replace(":meth:", "").replace(":attr:", "")
    return f"### `{name}`\n\n```python\n{kind} {name}{_signature(obj)}\n```\n\n{doc}\n"


def entries() -> str:
    """Every public name's entry, in ``__all__``'s order (alphabetical)."""
    import quotas.api

    return "\n".join(entry(name, getattr(quotas.api, name)) for name in quotas.api.__all__)


def render(text: str) -> str:
    """``text`` with the block between the markers written afresh."""
    return _BLOCK.sub(lambda _: f"{START}\n{entries()}{END}", text)


def main() -> int:
    import django

    django.setup()
    text = API_PAGE.read_text(encoding="utf-8")
    if START not in text or END not in text:
        print(f"docs/api.md has no {START} ... {END} block", file=sys.stderr)
        return 1
    rendered = render(text)
    if rendered == text:
        print("docs/api.md: the API reference is up to date.")
    else:
        API_PAGE.write_text(rendered, encoding="utf-8")
        print("docs/api.md: the API reference was rewritten.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
