"""No secret key is written in the repository: a deployment without one refuses to start; `make run` makes one."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from config.secret_key import key_file, read_key

BASE_DIR = Path(__file__).resolve().parent.parent

#: Each test starts the project's own processes (manage.py, the key generator).
pytestmark = pytest.mark.slow


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


def refused(result: subprocess.CompletedProcess, path: Path) -> str:
    """The ImproperlyConfigured message ``result`` ended with (asserting it failed with one naming ``path``)."""
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("django.core.exceptions.ImproperlyConfigured: "), result.stderr
    assert f"The secret key file {path} " in last
    assert "or set the SECRET_KEY environment variable" in last
    return last


def test_a_key_file_open_to_group_or_others_refuses_to_start(tmp_path):
    """The usage spool's rule: no permission bits for group or others. The message says to chmod 600, and that
    fix lets the process start."""
    run_dir = tmp_path / "run"
    run(["-m", "config.secret_key"], run_dir)
    key_file(run_dir).chmod(0o644)
    message = refused(run(["manage.py", "check"], run_dir), key_file(run_dir))
    assert "is open to group or others (mode 0644)" in message
    assert f"run `chmod 600 {key_file(run_dir)}`" in message
    key_file(run_dir).chmod(0o600)
    assert run(["manage.py", "check"], run_dir).returncode == 0  # the fix the message gave


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o620, 0o602, 0o666], ids=lambda mode: f"{mode:04o}")
def test_every_permission_bit_for_group_or_others_is_refused(tmp_path, mode):
    """Each bit alone (read or write, group or others) makes the file untrusted, with the chmod fix: read_key, the
    function the settings call at start-up (the test above shows a refusal stops the process)."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    key_file(run_dir).write_text("k" * 50)
    key_file(run_dir).chmod(mode)
    with pytest.raises(ImproperlyConfigured) as refusal:
        read_key(run_dir)
    assert f"is open to group or others (mode {mode:04o})" in str(refusal.value)
    assert f"run `chmod 600 {key_file(run_dir)}`" in str(refusal.value)
    key_file(run_dir).chmod(0o600)
    assert read_key(run_dir) == "k" * 50


@pytest.mark.skipif(os.getuid() != 0, reason="only root can give a file to another user")
def test_a_key_file_owned_by_another_user_refuses_to_start(tmp_path):
    """Even private (0600), a file this user does not own is not trusted; the message says to chown it."""
    run_dir = tmp_path / "run"
    run(["-m", "config.secret_key"], run_dir)
    os.chown(key_file(run_dir), 65534, 65534)
    message = refused(run(["manage.py", "check"], run_dir), key_file(run_dir))
    assert f"belongs to uid 65534, not to this user (uid {os.getuid()})" in message
    assert f"run `chown {os.getuid()} {key_file(run_dir)}`" in message


def test_an_empty_key_file_refuses_to_start_saying_it_is_empty(tmp_path):
    """An empty file (a failed write, a truncation) is not "no key": DEBUG or not, nothing starts on it."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    key_file(run_dir).touch(mode=0o600)
    for debug in ("0", "1"):
        message = refused(run(["manage.py", "check"], run_dir, DEBUG=debug), key_file(run_dir))
        assert "is empty" in message
        assert "python -m config.secret_key" in message
    assert key_file(run_dir).read_text() == ""  # not overwritten behind the operator's back
    key_file(run_dir).unlink()
    assert run(["-m", "config.secret_key"], run_dir).returncode == 0  # the fix the message gave
    assert len(read_key(run_dir)) >= 50


def test_a_symbolic_link_as_key_file_refuses_to_start(tmp_path):
    """The link may be private while what it points to is not: only a regular file of its own is trusted."""
    run_dir = tmp_path / "run"
    run(["-m", "config.secret_key"], tmp_path / "elsewhere")
    run_dir.mkdir()
    key_file(run_dir).symlink_to(key_file(tmp_path / "elsewhere"))
    assert "is a symbolic link" in refused(run(["manage.py", "check"], run_dir), key_file(run_dir))


def test_the_make_run_generator_refuses_a_bad_file_too(tmp_path):
    """`make run`'s first step stops on the same message rather than starting the platform on a bad key."""
    run_dir = tmp_path / "run"
    run(["-m", "config.secret_key"], run_dir)
    key_file(run_dir).chmod(0o644)
    refused(run(["-m", "config.secret_key"], run_dir), key_file(run_dir))


def test_the_environment_key_needs_no_file_so_a_bad_file_is_not_read(tmp_path):
    """A deployment with SECRET_KEY set starts whatever lies in the run directory."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    key_file(run_dir).touch(mode=0o644)
    assert run(["manage.py", "check"], run_dir, SECRET_KEY="k" * 50).returncode == 0


#: A racer: config/secret_key.py loaded by its path, without the config package, whose __init__ starts the
#: Celery app (half a second of CPU in each of eight processes, and racers that start that much further apart);
#: then the key of RUN_DIR, generated or read.
RACER = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("secret_key", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(module.ensure_key(module.run_dir()))
"""


def test_processes_racing_to_generate_the_key_all_read_the_one_written(tmp_path):
    """No process sees a half-written (empty) file: each gets the same whole key."""
    run_dir = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k != "SECRET_KEY"}
    env["RUN_DIR"] = str(run_dir)
    racers = [
        subprocess.Popen([sys.executable, "-c", RACER, BASE_DIR / "config" / "secret_key.py"], cwd=BASE_DIR, env=env,
                         stdout=subprocess.PIPE, text=True)
        for _ in range(8)
    ]  # fmt: skip
    keys = {racer.communicate(timeout=60)[0].strip() for racer in racers}
    assert keys == {read_key(run_dir)}
    assert [p.name for p in run_dir.iterdir()] == ["secret_key"]  # no temporary file left behind
