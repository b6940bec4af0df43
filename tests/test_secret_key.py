"""No secret key is written in the repository: a deployment without one refuses to start; `make run` makes one."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from config.secret_key import key_file, read_key

BASE_DIR = Path(__file__).resolve().parent.parent


def run(args: list[str], run_dir: Path, **extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "DEBUG")}
    env.update(RUN_DIR=str(run_dir), SQLITE_PATH=str(run_dir.parent / "db.sqlite3"), **extra)
    return subprocess.run([sys.executable, *args], cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=60)


def test_a_deployment_without_a_secret_key_refuses_to_start(tmp_path):
    """DEBUG off, no SECRET_KEY, no generated key: manage.py fails with a message saying what to do."""
    result = run(["manage.py", "check"], tmp_path / "run")
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert "SECRET_KEY is not set" in result.stderr
    assert "make run" in result.stderr
    assert not key_file(tmp_path / "run").exists()  # nothing made up behind the operator's back


def test_make_runs_key_is_generated_once_privately_and_found_by_every_later_command(tmp_path):
    run_dir = tmp_path / "run"
    assert run(["-m", "config.secret_key"], run_dir).returncode == 0
    key = read_key(run_dir)
    assert len(key) >= 50
    assert stat.S_IMODE(key_file(run_dir).stat().st_mode) == 0o600
    assert run(["-m", "config.secret_key"], run_dir).returncode == 0
    assert read_key(run_dir) == key  # a second `make run` keeps it: sessions and signed links stay valid
    shell = run(["manage.py", "shell", "-c", "from django.conf import settings; print(settings.SECRET_KEY)"], run_dir)
    assert shell.returncode == 0, shell.stderr
    assert shell.stdout.strip().splitlines()[-1] == key


def test_the_environment_wins_over_the_generated_key(tmp_path):
    run_dir = tmp_path / "run"
    run(["-m", "config.secret_key"], run_dir)
    code = "from django.conf import settings; print(settings.SECRET_KEY)"
    shell = run(["manage.py", "shell", "-c", code], run_dir, SECRET_KEY="from-the-environment-" + "x" * 40)
    assert shell.stdout.strip().splitlines()[-1] == "from-the-environment-" + "x" * 40


def test_a_debug_process_generates_the_key_itself_with_a_warning(tmp_path):
    """DEBUG on and no key: the process writes one to RUN_DIR (0600) and says so; the next command reuses it."""
    run_dir = tmp_path / "run"
    code = "from django.conf import settings; print(settings.SECRET_KEY)"
    first = run(["manage.py", "shell", "-c", code], run_dir, DEBUG="1")
    assert first.returncode == 0, first.stderr
    assert f"DEBUG generated one in {key_file(run_dir)}" in first.stderr
    key = read_key(run_dir)
    assert first.stdout.strip().splitlines()[-1] == key
    assert stat.S_IMODE(key_file(run_dir).stat().st_mode) == 0o600
    second = run(["manage.py", "shell", "-c", code], run_dir)  # DEBUG off now: the file is enough
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip().splitlines()[-1] == key
    assert "generated" not in second.stderr


def test_the_generator_writes_nothing_when_the_environment_has_a_key(tmp_path):
    run_dir = tmp_path / "run"
    assert run(["-m", "config.secret_key"], run_dir, SECRET_KEY="k" * 50).returncode == 0
    assert not key_file(run_dir).exists()
