"""A pytest plugin: the CPU seconds (time.process_time: user + system of the pytest process,
not of the subprocesses a test waits for) each test spends, setup and teardown included; the
costliest are listed at the end of the run. `--durations` gives wall time, which a shared
machine stretches.

Usage: PYTHONPATH=benchmarks python -m pytest -p pytest_cpu -p no:cacheprovider tests/test_x.py
"""

from __future__ import annotations

import time

import pytest

_SHOWN = 25
_cpu_by_test: list[tuple[float, str]] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    start = time.process_time()
    yield
    _cpu_by_test.append((time.process_time() - start, item.nodeid))


def pytest_terminal_summary(terminalreporter) -> None:
    total = sum(cpu for cpu, _ in _cpu_by_test)
    terminalreporter.write_sep("-", f"CPU-s per test (pytest process), {total:.2f} in all")
    for cpu, nodeid in sorted(_cpu_by_test, reverse=True)[:_SHOWN]:
        terminalreporter.write_line(f"{cpu:7.2f}  {nodeid}")
