# Two commands for a fresh machine: `make demo` and `make test`.
# Both create .venv when missing and install Fluid into it.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test lint clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# torch first, pinned: on the dev/CI machines this is a CPU wheel on local disk;
	# an unpinned torch would pull a multi-GB CUDA build.
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/fluid demo

test: $(STAMP)
	$(BIN)/ruff check fluid tests examples experiments
	$(BIN)/python -m pytest -q --durations=15 tests

lint: $(STAMP)
	$(BIN)/ruff check fluid tests examples experiments

clean:
	rm -rf $(VENV) build *.egg-info
