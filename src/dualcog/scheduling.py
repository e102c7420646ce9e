"""Snakemake scheduler settings this workflow applies at start (docs/performance.md).

Snakemake 9 throttles job starts with `--max-jobs-per-timespan` (default 100/1s). While jobs
wait, every pass of its scheduler loop arms another one-second timer that triggers a further
pass, so passes multiply with every job event: a run with hundreds of ready jobs spends
minutes of CPU re-selecting jobs and stat-ing their inputs (figures: docs/performance.md).
A local run's jobs are bounded by `--cores` anyway, so the throttle does nothing there but
cost; on a cluster it protects the batch system and stays.
"""

from __future__ import annotations

from typing import Any


def lift_local_start_limit(workflow: Any) -> bool:
    """Drop the job-start throttle of a local run; True when it was dropped.

    Reads Snakemake's scheduler through attributes that may change between releases: a
    release without them is left as it is.
    """
    if not getattr(workflow, "local_exec", False):
        return False
    scheduler = getattr(workflow, "scheduler", None)
    if scheduler is None or getattr(scheduler, "job_rate_limiter", None) is None:
        return False
    scheduler.job_rate_limiter = None
    return True
