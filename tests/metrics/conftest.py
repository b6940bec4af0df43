from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _bounded_labels(bounded_labels: None) -> None:
    """Every metrics test leaves the label values admitted as it found them (tests/conftest.py)."""
