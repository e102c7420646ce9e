"""A tiny batch queue on one machine, for `snakemake-executor-plugin-cluster-generic`.

Each job runs as its own detached process (new session, no terminal, output to a file) and
is tracked through files in a spool folder on the shared file system, as a real scheduler
tracks its jobs: `submit.py` prints a job id, `status.py` answers running/success/failed,
`cancel.py` ends jobs. A job whose process vanished without recording an exit status (killed,
machine rebooted) is reported `failed`, as SLURM reports a job lost with its node.

Spool: $DUALCOG_QUEUE_SPOOL, else .snakemake/localqueue under the working directory.
Standard library only: the scripts run with whatever `python3` is on PATH.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

RUNNING, SUCCESS, FAILED = "running", "success", "failed"


def spool() -> Path:
    root = os.environ.get("DUALCOG_QUEUE_SPOOL") or ".snakemake/localqueue"
    path = Path(root).resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def job_dir(job_id: str) -> Path:
    if not job_id or "/" in job_id or job_id.startswith("."):
        raise SystemExit(f"localqueue: not a job id: {job_id!r}")
    return spool() / job_id


def submit(jobscript: str) -> str:
    """Copy the job script (as sbatch does), start it detached, return the job id."""
    folder = Path(tempfile.mkdtemp(prefix="job", dir=spool()))
    script = folder / "jobscript.sh"
    shutil.copyfile(jobscript, script)
    with open(folder / "output.log", "wb") as output:
        process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--run", str(folder)],
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: survives us, killed as a whole
            close_fds=True,
        )
    (folder / "pid").write_text(str(process.pid))
    return folder.name


def run(folder: Path) -> None:
    """The detached job: run the script, then record its exit status atomically."""
    returncode = subprocess.call(["/bin/bash", str(folder / "jobscript.sh")])
    partial = folder / "returncode.partial"
    partial.write_text(str(returncode))
    os.replace(partial, folder / "returncode")


def _alive(pid: int, folder: Path) -> bool:
    proc = Path("/proc")
    if proc.joinpath("self").exists():  # Linux: the command line guards against PID reuse
        try:
            return str(folder).encode() in proc.joinpath(str(pid), "cmdline").read_bytes()
        except OSError:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def status(job_id: str) -> str:
    folder = job_dir(job_id)
    recorded = folder / "returncode"
    if recorded.exists():
        return SUCCESS if recorded.read_text().strip() == "0" else FAILED
    try:
        pid = int((folder / "pid").read_text())
    except (OSError, ValueError):
        return FAILED  # unknown or half-submitted job
    if _alive(pid, folder):
        return RUNNING
    # Gone: it may have recorded its status between our two looks.
    if recorded.exists():
        return SUCCESS if recorded.read_text().strip() == "0" else FAILED
    return FAILED


def cancel(job_ids: list[str]) -> None:
    for job_id in job_ids:
        folder = job_dir(job_id)
        try:
            pid = int((folder / "pid").read_text())
        except (OSError, ValueError):
            continue
        if _alive(pid, folder):
            with contextlib.suppress(ProcessLookupError):  # ended meanwhile
                os.killpg(pid, signal.SIGTERM)


if __name__ == "__main__" and sys.argv[1:2] == ["--run"]:
    run(Path(sys.argv[2]))
