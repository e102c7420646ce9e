"""All API runs of a workflow in one process, each provider's (run, task) units side by side.

A job that waits on a provider costs a thread, not a core. Snakemake's local executor runs at
most `--cores` + 5 jobs at once (one pool thread per job, `threads: 0` jobs included), and 5 on
a cluster's login node whatever `--local-cores` says, so one job per (run, task) leaves a
live evaluation bound by the core count instead of by the providers. Here every unit is a
thread of one job: the provider caps (`api_<provider>`: units of one provider at once;
`api_slots`: units of all providers at once) are kept by this module, and each run's request
budget (rpm/tpm limits, concurrency) by dualcog.inference.budget, which all units of a run
share through their files as separate jobs did.

Units go in the order given: a caller that interleaves runs (the first task of every run,
then the second, ...) starts every run of a provider before a second unit of any one run, so
each run's budget is in use from the start.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from typing import TypeVar

Unit = TypeVar("Unit")
Result = TypeVar("Result")


def run_by_provider(
    units: Sequence[Unit],
    provider_of: Callable[[Unit], Hashable],
    work: Callable[[Unit], Result],
    caps: Mapping[Hashable, int | None] | None = None,
    total: int | None = None,
) -> list[Result | BaseException]:
    """`work(unit)` for every unit, at most `caps[provider]` units of one provider and `total`
    of all at once (None or absent: no cap). A unit's exception is returned in its place; the
    other units go on. Results are in the order of `units`.
    """
    for name, cap in [*(caps or {}).items(), ("total", total)]:
        if cap is not None and cap < 1:
            raise ValueError(f"cap of {name} must be at least 1 unit, not {cap}")
    by_provider: dict[Hashable, list[int]] = {}
    for index, unit in enumerate(units):
        by_provider.setdefault(provider_of(unit), []).append(index)
    results: list[Result | BaseException | None] = [None] * len(units)
    shared = threading.BoundedSemaphore(total) if total is not None else None

    def one(index: int) -> None:
        with shared if shared is not None else nullcontext():
            try:
                results[index] = work(units[index])
            except Exception as error:  # the unit's failure, reported by the caller
                results[index] = error

    pools = []
    try:
        for provider, indices in by_provider.items():
            cap = (caps or {}).get(provider)
            workers = min(cap, len(indices)) if cap is not None else len(indices)
            pool = ThreadPoolExecutor(workers, thread_name_prefix=f"api-{provider}")
            pools.append(pool)
            for index in indices:
                pool.submit(one, index)
    finally:
        for pool in pools:
            pool.shutdown(wait=True)
    return results  # type: ignore[return-value]
