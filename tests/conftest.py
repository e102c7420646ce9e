import sys
from pathlib import Path

import pytest

# Test helpers (dataset_builder, fixtures) live here; the tests sit in folders by area, mirroring
# src/dualcog/, and some import a neighbour area's builders (`from test_inference_openai import
# make_model`), whichever folders a run collects.
TESTS = Path(__file__).parent
AREAS = sorted(str(area) for area in TESTS.iterdir() if any(area.glob("test_*.py")))
sys.path[:0] = [str(TESTS), *AREAS]

import workflow_runner  # noqa: E402 (found through the path above)

# The loopback server and media store fixtures of the `openai` backend tests; the shared
# demo run (`demo_workflow`, `demo_copy`).
pytest_plugins = ["inference_fixtures", "demo_fixtures"]

# What a test needs besides the Python process (pyproject.toml registers them; see
# docs/development.md for which to run when).
SUITE_MARKERS = ("unit", "workflow", "integration")
LONGEST_FILES = (
    "workflow/test_acceptance_paper_scale.py",
    "workflow/test_cluster_executor.py",
    "inference/test_sharding.py",
)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test marked neither `workflow` nor `integration` is a `unit` test. Files with a
    Snakemake run come first, in their usual order, then the rest."""
    for item in items:
        if not any(item.get_closest_marker(name) for name in SUITE_MARKERS):
            item.add_marker(pytest.mark.unit)
    # `make test` hands out whole files in this order (--no-loadscope-reorder): a file that runs
    # Snakemake takes tens of seconds, a unit file a few, so the long ones start first and the
    # short ones even out the workers' ends. (xdist's own order, most tests first, left
    # the workflow files with few tests for the end.)
    # The files that take a worker over a minute (`--durations`, docs/performance.md) start
    # first of all: the suite is CPU-bound, and one of them started late ends it alone.
    runs_snakemake = {item.path for item in items if item.get_closest_marker("workflow")}

    def order(item: pytest.Item) -> tuple[bool, bool]:
        longest = item.path.relative_to(TESTS).as_posix() in LONGEST_FILES
        return (not longest, item.path not in runs_snakemake)

    items.sort(key=order)  # stable: keeps the order within each class


@pytest.hookimpl(tryfirst=True)  # before the fixtures are set up
def pytest_runtest_setup(item: pytest.Item) -> None:
    # Keeps `-m unit` honest: Snakemake runs only in tests (and fixtures) marked `workflow`.
    workflow_runner.snakemake_allowed = item.get_closest_marker("workflow") is not None
