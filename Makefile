# The two commands: `make run` and `make test`. Everything installs itself into .venv.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# Two install stamps: `make run` installs only what running needs (requirements.txt); every other target also
# the test and tooling dependencies (requirements-dev.txt). Every pin is a wheel: `make wheels` proves it.
RUN_STAMP := $(VENV)/.installed-run
STAMP := $(VENV)/.installed
# The one test dependency with no wheel: promise (graphene-django's), pure Python, built by pip with Python alone.
SDIST_OK := promise

# The commands, not files: `bench`, `docs` and `tests`-like folders of the same name would otherwise make a
# command "up to date" and do nothing (`make bench` printed "'bench' is up to date" on a fresh clone).
.PHONY: install wheels run test test-fast matrix bench bench-count lint format settings-docs api-docs docs vendor clean

$(RUN_STAMP): requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --only-binary=:all: -r requirements.txt
	touch $(RUN_STAMP)

$(STAMP): requirements.txt requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --only-binary=:all: --no-binary=$(SDIST_OK) -r requirements-dev.txt
	touch $(RUN_STAMP) $(STAMP)

install: $(STAMP)

## Nothing `make run` or `make test` installs is built from source, but the pure-Python SDIST_OK: each requirement
## file resolves to wheels alone (a package that compiles against system headers fails here, on any machine,
## before it fails a user's).
wheels:
	@d=$$(mktemp -d) && trap 'rm -rf "$$d"' EXIT && for f in requirements.txt requirements-dev.txt requirements-docs.txt; do \
	  $(PYTHON) -m pip download --quiet --only-binary=:all: --no-binary=$(SDIST_OK) --dest "$$d" -r "$$f" || exit 1; \
	  echo "$$f: every requirement installs from a wheel"; done

## Start the platform: Redis (embedded unless REDIS_URL is set), gunicorn, Celery worker and beat.
run: $(RUN_STAMP)
	$(PY) -m config.secret_key
	$(PY) manage.py migrate --noinput
	$(PY) manage.py seed_demo
	$(PY) -m config.run

## The whole test suite (and PostgreSQL when DATABASE_URL is set), in three pytest-xdist workers on 2 cores
## (TEST_WORKERS=0 runs it in one process). Tests run on the memory store unless they ask for Redis (the redis
## marker); each worker then starts its own redis-server, Redis 6.2 and Cluster, and pytest-django gives it its own
## test database. The slow tests are handed out first, one at a time to the worker short of work
## (tests/conftest.py), so the workers end together (--dist loadgroup: under pytest 9.2 it no longer groups
## xdist_group marks, pytest-xdist#1386; the session's builds are shared between workers instead:
## tests/session_files.py). Why three workers on two cores: the slow tests mostly wait (for the processes,
## servers and browsers they start), and with two workers the suite kept the cores 60 % busy (121 % of 200 % CPU,
## `time -v`, quiet, 2026-11-29). Measured one after the other that night, quiet, PostgreSQL, 3,297 tests:
## -n 2 5 min 19 s, -n 3 3 min 58 s, -n 4 4 min 31 s (the money machine and the builds then fight for the CPU);
## a fresh clone's .ci/run at -n 3, quiet: 3,302 tests in 4 min 10 s, 4 min 11 s and 4 min 32 s (over the target).
## On 2026-11-30 the same machine ran about 55 % slower per CPU second (make test-fast at that day's first commit:
## 96.5 s, against 62 s the day before): a fresh clone's make test took 6 min 37 s, warm 6 min 24 s, quiet.
## That night (02:00 to 04:00 UTC) slower still (a bare loop of 20 million additions: 2.8 to 3.2 s): make test-fast
## 105 to 111 s quiet; a fresh clone's make test (CI) 7 min 4 s quiet, and 11 min 40 s with two busy loops
## holding both cores (every test passed).
## On 2026-11-30 at 04:40 UTC the machine was back at its usual speed (the same loop: 1.06 s): a fresh clone's
## make test with PostgreSQL, its virtualenv's install included, took 3 min 56 s (pytest: 3,319 passed in 3 min 26 s;
## 313 s of CPU, 76 % of both cores); CI's fresh clone the same, 3 min 29 s of pytest; make test-fast 50 s.
## Right after, with two busy loops holding both cores and two other sessions' work beside them (load average 7
## to 8): a fresh clone's make test passed every test, 3,319, in 10 min 32 s. At 06:48, with the two busy loops
## alone: 3,344 passed in 5 min 51 s (6 min 35 s with the virtualenv's install). Quiet at 06:42, CI's fresh clone:
## 3,344 passed in 3 min 14 s.
## Target: 4 min on 2 cores. With two busy loops on both cores and another session's benchmarks beside it, -n 3
## passed every test in 12 min 57 s (-n 2, two busy loops alone: 9 min 16 s). The slow tests are most of the
## time: the fresh project's builds and processes, the money machine (300 examples, the floor), the worker-kill
## tests, the MariaDB flush; a Django process start costs about 1.1 s of CPU. The PostgreSQL server's CPU is not
## in those figures (up to 39 s a run).
## Under other sessions' load it is far slower, and flakier: 16 min 14 s at a load average of 6 to 8 (-n 2), 24 min
## at 8 to 14; CPU seconds grow with the load on that virtual machine (the same 300 money-machine examples: 38 s of
## CPU at 6 to 8, 57 s at 10 to 14), so compare runs by per-test figures taken at one load (--durations).
## The property tests run fewer examples here than in the nightly job, which sets QUOTAS_MONEY_MACHINE=nightly and
## QUOTAS_BUDGET_PROPERTIES=nightly (tests/quotas/test_money_machine.py, tests/quotas/test_budget_properties.py).
TEST_WORKERS ?= 3
## The fast tests keep the CPU busy: one worker per core (a third only adds its start-up).
FAST_TEST_WORKERS ?= auto
## The tests write bytecode beside the sources (__pycache__, left out by git, tests/checkout.py and the sdist) even
## where the environment says not to: the processes the tests start find the project compiled (a Django process
## starts in 1.3 s of CPU, not 1.9; collection takes 4 s in a worker, not 12).
## The tests' temporary files (pytest's tmp_path: the fresh project's virtualenvs, some 16,000 files, copies of
## SQLite files, the servers' data) go to /dev/shm where it has 4 GB free: a memory file system. On a disk mounted
## with `discard` (this machine's ext4) a file's removal costs about 0.6 ms, and pytest removes the oldest of its
## last three runs' directories as it exits: 14 s for a full run's, after the last test. TEST_TMPDIR= keeps the
## system's temporary directory.
TEST_TMPDIR ?= $(shell d=/dev/shm; [ -d $$d ] && [ "$$(df -Pk $$d 2>/dev/null | awk 'NR == 2 {print $$4}')" -gt 4000000 ] 2>/dev/null && echo $$d)
TEST_ENV := PYTHONDONTWRITEBYTECODE= $(if $(TEST_TMPDIR),TMPDIR=$(TEST_TMPDIR))
test: $(STAMP)
	$(TEST_ENV) $(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

## The edit-run loop: every test but the slow ones (real time, real processes, browsers), in parallel. Target 60 s;
## measured quiet on 2026-11-29 (SQLite): 3,108 tests in 64 s (3,098 in 55 s that afternoon; 1 min 15 s before the
## WhiteNoise change above); on PostgreSQL at a load average of 7 from other sessions: 3,092 in 5 min 25 s, 171 s of
## CPU.
test-fast: $(STAMP)
	$(TEST_ENV) $(PY) -m pytest -n $(FAST_TEST_WORKERS) -m "not slow" $(PYTEST_ARGS)

## The library's fast tests (tests/quotas, neither slow nor PostgreSQL) on the oldest and the newest versions the
## package allows, one nox session per cell (noxfile.py). nox looks for python3.11 and python3.13 on PATH: pyenv's
## go first where pyenv has them.
PYENV_BINS = $(shell command -v pyenv >/dev/null && for v in 3.11 3.13; do d=$$(pyenv prefix $$v 2>/dev/null) && printf '%s/bin:' "$$d"; done)
matrix: $(STAMP)
	PATH="$(PYENV_BINS)$$PATH" $(PY) -m nox $(NOX_ARGS)

## Benchmarks: prints a table and writes bench-results.json.
bench: $(STAMP)
	$(PY) -m bench $(BENCH_ARGS)

## Section 13 alone: CPU instructions per decision under valgrind's cachegrind, QuotaThrottle beside limits
## (deterministic, unlike wall clock; about 80 s on 2 cores). Needs valgrind (Debian: apt-get install valgrind).
bench-count: $(STAMP)
	$(PY) -m bench --only count $(BENCH_ARGS)

## ruff, then mypy (django-stubs' plugin loads config.settings, which needs a key; mypy only reads types).
lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	SECRET_KEY="$${SECRET_KEY:-type-checking-only}" $(PY) -m mypy

format: $(STAMP)
	$(PY) -m ruff check --fix .
	$(PY) -m ruff format .

## Rewrite the settings tables of docs/settings.md from the settings' descriptions (quotas/settings/spec.py,
## and the section each app registers: adaptive/conf.py, notifications/conf.py, plans/conf.py, console/conf.py).
settings-docs: $(STAMP)
	$(PY) -m config.settings_docs

## docs/api.md's entries, written from quotas.api's signatures and docstrings.
api-docs: $(STAMP)
	DJANGO_SETTINGS_MODULE=config.settings SECRET_KEY=api-docs $(PY) -m config.api_docs

## The documentation site (mkdocs.yml, docs/) into run/site; strict: a broken link, anchor or nav entry fails.
## mkdocs alone, in a virtualenv of its own: building the docs needs none of the project's dependencies.
DOCS_VENV ?= .venv-docs
$(DOCS_VENV)/.installed: requirements-docs.txt
	test -x $(DOCS_VENV)/bin/python || $(PYTHON) -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/python -m pip install --quiet --only-binary=:all: -r requirements-docs.txt
	touch $@

docs: $(DOCS_VENV)/.installed
	$(DOCS_VENV)/bin/python -m mkdocs build --strict --site-dir run/site

## Refresh the dashboard's JavaScript from npm (package-lock.json) into dashboard/static; the copy is committed,
## so `make run` and the tests need no Node.js and the page works offline. Its licence travels next to it
## (vendor/chart.js.LICENSE, packaged in the wheel): update the version named there when chart.js changes.
vendor:
	npm ci --no-audit --no-fund
	cp node_modules/chart.js/dist/chart.umd.min.js dashboard/static/dashboard/vendor/chart.umd.min.js

clean:
	rm -rf run/ .pytest_cache .ruff_cache .nox
