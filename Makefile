# Two commands for a fresh machine: `make demo` and `make test`.
# Both create .venv when missing and install Fluid into it.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The oldest Ray that fluid.tune supports (SUPPORTED_RAY in fluid/tune/_ray_versions.py):
# `make test-oldest-ray` runs the Tune, Train and scheduler tests on it, in a second venv.
# Ray 2.50 runs Ray Train V1 unless RAY_TRAIN_V2_ENABLED=1 (Fluid's Ray Train glue needs V2).
OLDEST_RAY := 2.50.1
OLD_VENV := .venv-ray-oldest
OLD_STAMP := $(OLD_VENV)/.installed

# The offline bundle (docs/gpu-clusters.md, "Offline install"): Fluid, Ray Tune and what they need
# beyond a PyTorch GPU image, for CPython $(BUNDLE_PYTHON) on manylinux x86_64, in one .tar.xz.
# BUNDLE_ASSUME names what the image holds besides torch (left out); empty for a full bundle.
BUNDLE_PYTHON ?= 3.12
BUNDLE_ASSUME ?= numpy scipy pandas pyarrow
BUNDLE := dist/fluid-offline-py$(BUNDLE_PYTHON).tar.xz

.PHONY: install demo benchmarks test test-slow test-oldest-ray lint clean offline-bundle offline-bundle-check

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

# docs/benchmarks.md: runs the benchmarks not in results/benchmarks yet (hours on 2 CPUs; it
# resumes where it stopped), then writes the page from their JSON.
benchmarks: $(STAMP)
	$(BIN)/fluid bench doc results/benchmarks --run

# --dist loadfile: each test module runs in one worker, so its shared Ray instance starts once.
# `make test` runs every test but those marked slow (long end-to-end runs of the CLIs, the
# experiments, simulated clusters and training); the drop-in suites, Ray's own examples
# included, are in it. `make test-slow` runs the slow ones; CI (.ci/run) runs both.
PYTEST := $(BIN)/python -m pytest -q -n 2 --dist loadfile --durations=15
test: $(STAMP)
	$(BIN)/ruff check fluid tests examples experiments tools
	$(PYTEST) -m "not slow" tests

test-slow: $(STAMP)
	$(PYTEST) -m slow tests

$(OLD_STAMP): pyproject.toml
	test -x $(OLD_VENV)/bin/python || $(PYTHON) -m venv $(OLD_VENV)
	$(OLD_VENV)/bin/python -m pip install -q --upgrade pip
	$(OLD_VENV)/bin/python -m pip install -q torch==2.13.0
	$(OLD_VENV)/bin/python -m pip install -q -e '.[test]' 'ray[tune]==$(OLDEST_RAY)'
	touch $(OLD_STAMP)

test-oldest-ray: $(OLD_STAMP)
	RAY_TRAIN_V2_ENABLED=1 $(OLD_VENV)/bin/python -m pytest -q -n 2 --dist loadfile \
		tests/tune tests/train tests/schedulers

lint: $(STAMP)
	$(BIN)/ruff check fluid tests examples experiments tools

offline-bundle: $(STAMP)
	$(BIN)/python tools/offline_bundle.py --python $(BUNDLE_PYTHON) --assume '$(BUNDLE_ASSUME)' \
		--out $(BUNDLE)

# Installs the bundle, index off, into a fresh venv of python$(BUNDLE_PYTHON) holding only torch and
# BUNDLE_ASSUME (as a GPU image would), then runs `fluid bench gpu --smoke` from it.
offline-bundle-check: $(BUNDLE)
	tools/check_offline_bundle.sh $(BUNDLE) python$(BUNDLE_PYTHON) '$(BUNDLE_ASSUME)' torch==2.13.0

$(BUNDLE):
	$(MAKE) offline-bundle

clean:
	rm -rf $(VENV) $(OLD_VENV) build *.egg-info
