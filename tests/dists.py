"""The session's sdist and wheel, as ``python -m build`` makes them from a clean copy of this checkout: what a
release publishes. tests/test_packaging.py looks into both; tests/test_fresh_project.py installs the wheel."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.checkout import copy_checkout
from tests.session_files import built_once, shared


@pytest.fixture(scope="session")
def dists(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The sdist, and the wheel built from it (a few seconds: each isolated build environment takes setuptools
    from the package registry).

    Built once for the session, by the first xdist worker that asks (the others wait for it, see
    :func:`built_once`): each worker building its own cost 4 to 5 s of CPU more for the same files, and the
    fresh project building a wheel of its own with ``pip wheel`` another 2.7 s (and 10 s of a worker's wall
    clock under load) for the same files again."""
    out = shared(tmp_path_factory, "packaging", "dist")
    with built_once(out) as building:
        if building:
            source = copy_checkout(tmp_path_factory.mktemp("source"))
            built = subprocess.run(
                [sys.executable, "-m", "build", "--outdir", str(out), str(source)],
                capture_output=True, text=True, timeout=300, check=False,
            )  # fmt: skip
            assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (sdist,) = out.glob("django_quota_platform-*.tar.gz")
    (wheel,) = out.glob("django_quota_platform-*.whl")
    return sdist, wheel
