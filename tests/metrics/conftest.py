from __future__ import annotations

from collections.abc import Iterator

import pytest

from quotas import metrics


@pytest.fixture(autouse=True)
def bounded_labels() -> Iterator[None]:
    """Each test starts with the label values admitted so far and leaves them as it found them.

    (The series a test created stay in the registry, as they would in a process.)
    """
    labels = [obj for obj in vars(metrics).values() if isinstance(obj, metrics.BoundedLabel)]
    saved = {label: set(label.seen) for label in labels}
    yield
    for label, seen in saved.items():
        label.seen = seen
