"""`run_step`: a job's log file, its CPU on the last line, and its failures."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# argv: the log path, the object kind (snakemake | namespace), whether a thread is left.
JOB = """
import atexit, sys, threading, time
from types import SimpleNamespace
from dualcog.runtime import log, run_step

log_path, kind, thread_left = sys.argv[1], sys.argv[2], sys.argv[3] == "yes"
atexit.register(lambda: print("interpreter teardown ran"))
if kind == "snakemake":  # what Snakemake's script preamble unpickles
    Snakemake = type("Snakemake", (), {"__module__": "snakemake.iocontainers"})
    job = Snakemake()
    job.log, job.rule = [log_path], "r"
else:
    job = SimpleNamespace(log=[log_path], rule="r")


def main(sm):
    if thread_left:
        threading.Thread(target=time.sleep, args=(0.5,)).start()
    print("job output")
    log.info("the job's last line")


run_step(job, main)
print("returned to the caller")
"""


def test_a_job_logs_its_cpu_and_returns_to_its_caller(tmp_path: Path) -> None:
    log_path = tmp_path / "job.log"
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    result = subprocess.run(
        [sys.executable, "-c", JOB, str(log_path), "snakemake", "yes"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "job output" in result.stdout
    logged = log_path.read_text()
    assert "the job's last line" in logged
    assert re.search(r"done in [\d.]+ s \(process CPU [\d.]+ s", logged)
    assert "returned to the caller" in result.stdout
    assert "interpreter teardown ran" in result.stdout


def test_a_known_error_ends_the_job_with_its_message(tmp_path: Path) -> None:
    known = JOB.replace(
        'log.info("the job\'s last line")',
        'from dualcog.errors import DualCogError; raise DualCogError("no such file x.parquet")',
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    result = subprocess.run(
        [sys.executable, "-c", known, str(tmp_path / "job.log"), "namespace", "no"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "ERROR dualcog: no such file x.parquet" in (tmp_path / "job.log").read_text()


def test_a_failed_snakemake_job_still_fails(tmp_path: Path) -> None:
    failing = JOB.replace('log.info("the job\'s last line")', 'raise RuntimeError("broken")')
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    result = subprocess.run(
        [sys.executable, "-c", failing, str(tmp_path / "job.log"), "snakemake", "no"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert result.returncode != 0
    assert "broken" in (tmp_path / "job.log").read_text()


# A job whose work is done by a worker process: the child burns CPU-s of its own.
WORKER_JOB = """
import subprocess, sys
from types import SimpleNamespace
from dualcog.runtime import run_step

BURN = "import time\\nwhile time.process_time() < 0.6: pass"
run_step(SimpleNamespace(log=[sys.argv[1]], rule="r"),
         lambda sm: subprocess.run([sys.executable, "-c", BURN], check=True))
"""


def test_the_logged_cpu_counts_the_jobs_worker_processes(tmp_path: Path) -> None:
    """explorer_media's work is done in worker processes: the job's last line (which
    benchmarks/_workflow.cpu_by_rule sums per rule) counts their CPU, not only its own."""
    log_path = tmp_path / "job.log"
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    result = subprocess.run(
        [sys.executable, "-c", WORKER_JOB, str(log_path)],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    logged = re.search(r"process CPU ([\d.]+) s", log_path.read_text())
    assert logged and float(logged.group(1)) >= 0.6  # the parent alone: about a tenth of that
