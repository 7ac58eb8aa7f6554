# Cortex: `make demo` sets up and tells the story; `make test` runs the tests; `make` runs both
# the tests and the linters.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.DEFAULT_GOAL := check
.PHONY: setup demo test lint compat check bench clean

# pip 25.2 and later write a console script that imports no `re` (about 2.5 ms of every
# `cortex` command with `enum` behind it); the venv's bundled pip may be older.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check --upgrade 'pip>=25.2'
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev,postgres,server]'
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(BIN)/cortex demo

# Tests run on one worker per core (pytest-xdist); a module whose fixtures are module-scoped
# (a browser, a served site) stays on one worker (xdist_group). Bytecode caches are written
# even where PYTHONDONTWRITEBYTECODE is set: the suite starts hundreds of Cortex processes, and
# without caches each one compiles the modules it imports again (about 70 ms a process), and
# pytest rewrites every test module's asserts again in each worker.
test: setup
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/pytest -n auto --dist loadgroup

lint: setup
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/ruff format --check src tests bench scripts
	$(BIN)/mypy

# What leans on the standard library's insides (stand-in modules, cached dataclass methods,
# the hook client), tested on Python 3.12 and 3.13 too where this machine has them.
compat:
	scripts/compat-tests

check: test lint

bench: setup
	$(BIN)/python bench/core.py

clean:
	rm -rf $(VENV) .venv-3.* .pytest_cache .mypy_cache .ruff_cache
