"""Timing helpers shared by the benchmarks: best-of-N wall and CPU time, side-by-side lines."""

from __future__ import annotations

import os
import platform
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Timing:
    wall_s: float
    cpu_s: float  # this process and its finished children


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def measure(fn: Callable[[], Any], repeats: int = 3) -> tuple[Timing, Any]:
    """Best wall time of `repeats` calls (with that call's CPU time) and the last result."""
    best: Timing | None = None
    result = None
    for _ in range(repeats):
        cpu, wall = _cpu(), time.perf_counter()
        result = fn()
        timing = Timing(time.perf_counter() - wall, _cpu() - cpu)
        if best is None or timing.wall_s < best.wall_s:
            best = timing
    assert best is not None
    return best, result


def report(title: str, n: int, unit: str, ours: Timing, naive: Timing, rate: bool = True) -> None:
    """Print ours and the naive implementation side by side (rates per CPU second)."""
    print(f"{title} ({n:,} {unit})")
    for name, t in (("ours", ours), ("naive", naive)):
        per_cpu = f"{n / t.cpu_s:14,.0f} {unit} per CPU-s" if rate and t.cpu_s else ""
        print(f"  {name:<6} wall {t.wall_s:9.3f} s  CPU {t.cpu_s:9.3f} s  {per_cpu}")
    print(
        f"  speed-up: {naive.wall_s / ours.wall_s:.1f}x wall, {naive.cpu_s / ours.cpu_s:.1f}x CPU"
    )


def machine() -> str:
    load = os.getloadavg()
    return (
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, load average {load[0]:.2f}"
    )
