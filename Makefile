# The README's two commands (demo, test) and the checks; each sets up .venv itself.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test check lint format bench clean prometheus

$(STAMP): requirements.lock pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.lock
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $(STAMP)

demo: $(STAMP)
	@if [ -t 0 ]; then $(BIN)/pitcrew demo; else $(BIN)/pitcrew demo --yes; fi

test: check prometheus
	$(BIN)/pitcrew playbooks test
	$(BIN)/python -m pytest -q

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

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache

# The memory-evidence tests run a real Prometheus (Debian's package) on loopback.
prometheus:
	@command -v prometheus >/dev/null && command -v promtool >/dev/null || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus)
