"""The job-start throttle is lifted for local runs only, on the installed Snakemake."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from workflow_runner import REPO

from dualcog.scheduling import lift_local_start_limit


def _workflow(local: bool) -> SimpleNamespace:
    return SimpleNamespace(local_exec=local, scheduler=SimpleNamespace(job_rate_limiter=object()))


def test_local_runs_lose_the_throttle() -> None:
    workflow = _workflow(local=True)
    assert lift_local_start_limit(workflow)
    assert workflow.scheduler.job_rate_limiter is None


def test_cluster_runs_keep_it() -> None:
    workflow = _workflow(local=False)
    assert not lift_local_start_limit(workflow)
    assert workflow.scheduler.job_rate_limiter is not None


def test_a_snakemake_without_the_attributes_is_left_alone() -> None:
    assert not lift_local_start_limit(SimpleNamespace(local_exec=True))
    assert not lift_local_start_limit(SimpleNamespace(local_exec=True, scheduler=None))


def test_the_installed_snakemake_has_a_throttle_that_the_hook_lifts(tmp_path: Path) -> None:
    """A real run: before the hook the scheduler holds a limiter, after it none."""
    (tmp_path / "Snakefile").write_text(
        f"""
import sys
sys.path.insert(0, {str(REPO / "src")!r})
from dualcog.scheduling import lift_local_start_limit

onstart:
    before = workflow.scheduler.job_rate_limiter is not None
    lifted = lift_local_start_limit(workflow)
    after = workflow.scheduler.job_rate_limiter is None
    with open("hook.txt", "w") as handle:
        handle.write(f"{{before}} {{lifted}} {{after}}")

rule all:
    output: "done.txt"
    shell: "touch {{output}}"
"""
    )
    subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "1", "-q"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    assert (tmp_path / "hook.txt").read_text() == "True True True"
    assert (tmp_path / "done.txt").is_file()
