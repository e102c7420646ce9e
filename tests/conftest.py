import sys
from pathlib import Path

import pytest

# Test helpers (dataset_builder, fixtures) live beside the tests.
sys.path.insert(0, str(Path(__file__).parent))

import workflow_runner  # noqa: E402 (found through the path above)

# The loopback server and media store fixtures of the `openai` backend tests; the shared
# demo run (`demo_workflow`, `demo_copy`).
pytest_plugins = ["inference_fixtures", "demo_fixtures"]

# What a test needs besides the Python process (pyproject.toml registers them; see
# docs/development.md for which to run when).
SUITE_MARKERS = ("unit", "workflow", "integration")


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test marked neither `workflow` nor `integration` is a `unit` test."""
    for item in items:
        if not any(item.get_closest_marker(name) for name in SUITE_MARKERS):
            item.add_marker(pytest.mark.unit)


@pytest.hookimpl(tryfirst=True)  # before the fixtures are set up
def pytest_runtest_setup(item: pytest.Item) -> None:
    # Keeps `-m unit` honest: Snakemake runs only in tests (and fixtures) marked `workflow`.
    workflow_runner.snakemake_allowed = item.get_closest_marker("workflow") is not None
