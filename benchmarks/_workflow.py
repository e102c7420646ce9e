"""Running the workflow for the benchmarks: a fresh working directory, a revision's tree."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from _timing import Timing, measure

REPO = Path(__file__).resolve().parents[1]


def revision_tree(revision: str) -> Path:
    """The repository at `revision` (git archive) in a temporary folder."""
    target = Path(tempfile.mkdtemp(prefix=f"dualcog-{revision[:12]}-"))
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", revision], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    # Compiled as `make` compiles our tree (.venv/.compiled): with PYTHONDONTWRITEBYTECODE
    # set, each of the baseline's jobs would compile the modules it imports.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(target / "src")], check=True)
    return target


def fresh_workdir(benchmark: Path) -> Path:
    """A working directory holding the benchmark's config and a link to its data."""
    workdir = Path(tempfile.mkdtemp(prefix="dualcog-run-"))
    shutil.copytree(benchmark / "config", workdir / "config")
    (workdir / "data").symlink_to((benchmark / "data").resolve())
    return workdir


def snakemake(tree: Path, workdir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    command = [sys.executable, "-m", "snakemake", "--snakefile", str(tree / "Snakefile"),
               "--directory", str(workdir), *args]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise RuntimeError(f"snakemake {' '.join(args)} failed:\n{result.stderr[-3000:]}")
    return result


def timed_snakemake(tree: Path, workdir: Path, *args: str, repeats: int = 1) -> Timing:
    timing, _ = measure(lambda: snakemake(tree, workdir, *args), repeats)
    return timing


_DONE = re.compile(r"done in ([\d.]+) s \(process CPU ([\d.]+) s")


def cpu_by_rule(workdir: Path) -> dict[str, tuple[int, float]]:
    """(jobs, process CPU seconds) per rule from the jobs' logs (run_step's last line)."""
    out: dict[str, tuple[int, float]] = {}
    logs = workdir / "results" / "logs"
    for log in logs.rglob("*.log"):
        found = _DONE.findall(log.read_text(errors="replace"))
        if not found:
            continue
        relative = log.relative_to(logs)
        rule = relative.parts[0] if len(relative.parts) > 1 else relative.stem.split(".")[0]
        if relative.name == "replay.log":  # logs/infer/<run>/replay.log: a replay job
            rule = "replay"
        elif relative.name == "run.log":  # logs/infer/<run>/run.log: an infer_run job
            rule = "infer_run"
        jobs, cpu = out.get(rule, (0, 0.0))
        out[rule] = (jobs + 1, cpu + float(found[-1][1]))
    return out
