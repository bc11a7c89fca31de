# The README's two commands (demo, test) and the checks; each sets up .venv itself.
# requirements.lock is the one pinned set: the venv installs all of it (the runtime, the
# demo's Ray and kmock, the test tools); the image installs only the runtime part, by
# using the lock as a constraint on the wheel's own dependencies (see the Dockerfile).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast check lint format bench image image-test clean prometheus alertmanager postgresql

$(STAMP): requirements.lock pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.lock
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $(STAMP)

demo: $(STAMP)
	@if [ -t 0 ]; then $(BIN)/pitcrew demo; else $(BIN)/pitcrew demo --yes; fi

test: check prometheus alertmanager postgresql
	$(BIN)/pitcrew playbooks test
	$(BIN)/python -m pytest -q

# The inner loop (tests/README.md): every test that needs no real service (tests/e2e/ and
# the store suite's PostgreSQL cases are left out) and takes under 5 s (no `slow` marker),
# each stopped after 20 s; its wall time is the last line.
test-fast: $(STAMP)
	@start=$$(date +%s); \
	$(BIN)/python -m pytest -q -n auto --ignore=tests/e2e -m "not slow and not postgres" --timeout=20; status=$$?; \
	echo "test-fast: $$(( $$(date +%s) - start )) s"; exit $$status

check: $(STAMP)
	$(BIN)/ruff format --check bot tests bench
	$(BIN)/ruff check bot tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python -m bot.app.docgen --check

format: $(STAMP)
	$(BIN)/ruff format bot tests bench
	$(BIN)/ruff check --fix bot tests bench

bench: $(STAMP)
	$(BIN)/python bench/classify.py
	$(BIN)/python bench/startup.py

# The container image, built by buildah (installed with apt-get when missing; vfs storage,
# chroot isolation, no daemon). PYTHON_IMAGE=... picks the base; without it the Dockerfile's
# default is pulled, or, where no registry answers, made with debootstrap (scripts/image.sh).
image:
	bash scripts/image.sh build

# pitcrew version / diagnose (the seed files) / config check / playbooks test inside the
# image, as uid 10001 with a read-only root; the venv, when there, says what the seed is.
image-test:
	bash scripts/image.sh test

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache

# The memory-evidence tests run a real Prometheus (Debian's package) on loopback.
prometheus:
	@command -v prometheus >/dev/null && command -v promtool >/dev/null || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus)

# The Alertmanager tests run Debian's Alertmanager (and amtool) on loopback, its webhook
# receiver pointed at `pitcrew run`.
alertmanager:
	@command -v prometheus-alertmanager >/dev/null && command -v amtool >/dev/null || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus-alertmanager)

# The shared store's tests start a real PostgreSQL (Debian's package) on loopback, as the
# tests' own server (a temporary cluster, stopped by pid). The package puts initdb and
# postgres in /usr/lib/postgresql/<version>/bin; the cluster it makes (and may start) for
# the system is not used.
postgresql:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql)
