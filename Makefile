# The two README commands: `make demo` (run the workflow on the embedded demo benchmark)
# and `make test` (the test suite). Both create .venv and install what they need.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CORES ?= 2

.PHONY: demo test lint clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(BIN)/pip install --quiet -e ".[test]"
	touch $@

demo: $(VENV)/.installed
	$(BIN)/snakemake --cores $(CORES)
	@echo "Tables: results/tables/ (image_main, video_main, audit, audit_gains, overall); page: results/leaderboard.html"

test: $(VENV)/.installed-test
	$(BIN)/python -m pytest

lint: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/snakefmt --check Snakefile rules
	$(BIN)/snakemake --lint --cores 1

clean:
	rm -rf results .snakemake
