"""quotas.api is a short, documented list: docs/api.md's entries are the ones written from the code."""

from __future__ import annotations

import inspect

import quotas.api
from config.api_docs import API_PAGE, END, START, entries, render


def test_the_reference_is_the_one_written_from_the_code():
    """After changing a public name's signature or docstring, `make api-docs` rewrites its entry."""
    text = API_PAGE.read_text(encoding="utf-8")
    assert text.split(START, 1)[1].split(END, 1)[0] == "\n" + entries(), "run `make api-docs`"
    assert render(text) == text


def test_the_public_api_is_about_a_dozen_documented_names():
    """Projects get a short list, each name with a docstring; the sibling apps' needs are quotas.internal_api's."""
    names = quotas.api.__all__
    assert len(names) <= 13
    assert names == sorted(names)
    undocumented = [n for n in names if not inspect.getdoc(getattr(quotas.api, n))]
    assert undocumented == []
