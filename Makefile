# Two commands do everything on a fresh machine:
#   make demo   set up, then run `gradscope inspect` on a built-in example
#   make test   set up, then run the test suite
# Set-up: a virtual environment in .venv with the CPU build of torch (pinned:
# an unpinned torch pulls a multi-GB CUDA build), gradscope and pytest, and
# Graphviz's `dot` from the system's packages where it can be installed.

PYTHON ?= python3
VENV   ?= .venv
TORCH  ?= torch==2.13.0
# Elsewhere, point pip at PyTorch's CPU wheels: make TORCH_INDEX=https://download.pytorch.org/whl/cpu
TORCH_INDEX ?=
BIN := $(VENV)/bin

.PHONY: setup demo test test-fast corpus lint bench docs clean

setup: $(VENV)/.installed graphviz

# A line before each long step, and pip's own progress (not -q): set-up takes minutes
# (README.md, Install and first run), and a silent one looks hung.
$(VENV)/.installed: pyproject.toml
	@echo "setting up $(VENV), once: 1-3 min on a quiet 2-core machine, up to 6 on a loaded one"
	@echo "setting up $(VENV): the virtual environment"
	$(PYTHON) -m venv $(VENV)
	@echo "setting up $(VENV): $(TORCH), the CPU build (a 190 MB download, 750 MB installed)"
	$(BIN)/pip install $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) "$(TORCH)"
	@echo "setting up $(VENV): gradscope, the test suite's packages (transformers, tensorboard, pytest, ...) and the linters"
	$(BIN)/pip install -e ".[test,dev]"
	touch $@
	@echo "setting up $(VENV): done; the command is $(BIN)/gradscope"

graphviz:
	@command -v dot >/dev/null 2>&1 || { \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    { apt-get update -qq && apt-get install -y -qq graphviz >/dev/null; } || \
	      echo "note: apt-get could not install graphviz; gradscope graph then writes only --format dot"; \
	  else \
	    echo "note: Graphviz's dot is not installed (apt-get install graphviz, brew install graphviz);"; \
	    echo "      gradscope graph then writes only --format dot"; \
	  fi; }

demo: setup
	$(BIN)/gradscope inspect detached-middle --fail-on never

# three pytest-xdist workers, also on 2 CPUs: the slow tests mostly wait on launches,
# subprocesses and timeouts; a file's tests stay on one worker (shared launches);
# --no-loadscope-reorder keeps tests/conftest.py's order (the files with the most slow
# tests first) instead of xdist's (the most tests first, which left the long files last)
test: setup
	$(BIN)/python -m pytest -n 3 --dist loadfile --no-loadscope-reorder

# the inner loop: everything but the real-architecture and subprocess tests
test-fast: setup
	$(BIN)/python -m pytest -n auto --dist loadfile --no-loadscope-reorder -m "not slow"

# the precursor corpus's further seeds and its 3-layer run (tests marked corpus; make
# test has seed 0 of the 2-layer runs and their controls)
corpus: setup
	$(BIN)/python -m pytest -n 2 --dist loadfile -m corpus

lint: setup
	$(BIN)/ruff check gradscope tests benchmarks
	$(BIN)/ruff format --check gradscope tests benchmarks
	$(BIN)/mypy
	$(BIN)/vulture

bench: setup
	$(BIN)/python benchmarks/bench_inspect.py
	$(BIN)/python benchmarks/bench_inspect_rules.py

# docs/rules.md's rule table and sections and docs/config.md's threshold table, from the registry
docs: setup
	$(BIN)/python -m gradscope.rule_docs docs/rules.md

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache
