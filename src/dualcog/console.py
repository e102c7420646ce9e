"""The console of a workflow run: one line per job start and end, and an overall progress line
with an ETA across jobs, at most every `every_s` seconds (and at the last job).

Snakemake's own console prints each job's inputs, outputs and reason on many lines (one line
of a tables job lists every model's files: 137 kB at 45 models) and a progress line after
every job. `JobConsole` turns Snakemake's log records into short lines instead; every other
record (errors, warnings, the job counts, the workflow's own messages) keeps Snakemake's
format. The logger plugin `snakemake_logger_plugin_dualcog` (selected by
profiles/default/config.yaml) writes these lines to the console; dry runs keep Snakemake's
full listing with each job's reason.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from dualcog.errors import ConfigError
from dualcog.routes import read_yaml

# Snakemake's log event names (snakemake_interface_logger_plugins.common.LogEvent values).
JOB_INFO, JOB_FINISHED, JOB_STARTED = "job_info", "job_finished", "job_started"
PROGRESS = "progress"
# Printed by the scheduler on every pass; the start lines say the same per job.
SCHEDULER_CHATTER = ("Select jobs to execute...",)


def format_duration(seconds: float) -> str:
    """`42s`, `3m05s`, `2h07m`."""
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


# A job resource (rules/api.smk): the least seconds the job's API requests take at the
# providers' limits. The ETA is never shorter than what is left of it.
BOUND_RESOURCE = "api_bound_s"


@dataclass(frozen=True)
class StartedJob:
    label: str
    started: float
    bound_s: float = 0.0


def job_label(rule: str, wildcards: Mapping[str, str] | None) -> str:
    """`parse (model=sim-run-01-Instant)`: the rule and the wildcards that tell jobs apart."""
    if not wildcards:
        return rule
    return f"{rule} ({', '.join(f'{key}={value}' for key, value in wildcards.items())})"


class JobConsole:
    """Short console lines from Snakemake's log records; None where a record prints nothing.

    `fallback` formats the records this class leaves to Snakemake (its default formatter).
    """

    def __init__(
        self,
        fallback: Callable[[logging.LogRecord], str],
        every_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], str] = lambda: time.strftime("%H:%M:%S"),
    ) -> None:
        self.fallback = fallback
        self.every_s = every_s
        self.clock = clock
        self.wall_clock = wall_clock
        self.jobs: dict[int, StartedJob] = {}
        self.first_start: float | None = None
        self.last_progress: float | None = None

    def line(self, record: logging.LogRecord) -> str | None:
        event = str(getattr(record, "event", "") or "")
        if event == JOB_INFO:
            return self._started(record)
        if event == JOB_FINISHED:
            return self._finished(record)
        if event == PROGRESS:
            return self._progress(record.done, record.total)
        if event == JOB_STARTED or record.getMessage() in SCHEDULER_CHATTER:
            return None
        text = self.fallback(record)
        return text if text and text != "None" else None

    def _started(self, record: logging.LogRecord) -> str:
        now = self.clock()
        if self.first_start is None:
            self.first_start = now
        label = job_label(record.rule_name, record.wildcards)
        bound = float((getattr(record, "resources", None) or {}).get(BOUND_RESOURCE) or 0)
        self.jobs[record.jobid] = StartedJob(label, now, bound)
        line = f"{self.wall_clock()} start {label} [job {record.jobid}]"
        if bound:
            line += f", the providers' limits allow it no less than {format_duration(bound)}"
        return line

    def _finished(self, record: logging.LogRecord) -> str:
        job = self.jobs.pop(record.job_id, None)
        if job is None:  # started before this handler saw it (e.g. --quiet rules)
            return f"{self.wall_clock()} done  job {record.job_id}"
        took = format_duration(self.clock() - job.started)
        return f"{self.wall_clock()} done  {job.label} in {took} [job {record.job_id}]"

    def _progress(self, done: int, total: int) -> str | None:
        now = self.clock()
        due = self.last_progress is None or now - self.last_progress >= self.every_s
        if not (due or done >= total):
            return None
        self.last_progress = now
        bound_left = max((j.started + j.bound_s - now for j in self.jobs.values()), default=0.0)
        elapsed = now - (self.first_start or now)
        return f"{self.wall_clock()} {progress_text(done, total, elapsed, bound_left)}"


def progress_text(done: int, total: int, elapsed: float, bound_left: float = 0.0) -> str:
    """`12 of 245 jobs done (5%), elapsed 1m05s, ETA 21m10s`: the ETA from the mean job rate,
    or what is left of a running job's providers' bound (`BOUND_RESOURCE`) when longer."""
    percent = 100 * done / total if total else 100.0
    text = f"{done} of {total} jobs done ({percent:.0f}%), elapsed {format_duration(elapsed)}"
    if done >= total:
        return text
    if (done == 0 or elapsed <= 0) and bound_left <= 0:
        return text + ", ETA ?"
    by_rate = (total - done) * elapsed / done if done and elapsed > 0 else 0.0
    return text + f", ETA {format_duration(max(by_rate, bound_left))}"


# Snakemake reads `--configfile` before any workflow code runs and, when the file is not
# YAML or is empty, says only one of these; the console names the file (line and column).
UNREADABLE_CONFIG = (
    "Config file is not valid JSON or YAML",
    "Config file must be given as JSON or YAML with keys at top level",
)


def configfile_paths(argv: list[str]) -> list[str]:
    """The files given to `--configfile`/`--configfiles` on a Snakemake command line."""
    paths: list[str] = []
    taking = False
    for arg in argv:
        if arg in ("--configfile", "--configfiles"):
            taking = True
        elif arg.startswith(("--configfile=", "--configfiles=")):
            paths.append(arg.split("=", 1)[1])
            taking = False
        elif arg.startswith("-"):
            taking = False
        elif taking:
            paths.append(arg)
    return paths


def unreadable_config_detail(message: str, argv: list[str]) -> str | None:
    """For Snakemake's message about a config file it cannot read: each given config file's
    YAML mistake with its line and column (dualcog.routes.read_yaml); None otherwise."""
    if not any(said in message for said in UNREADABLE_CONFIG):
        return None

    problems = []
    for path in configfile_paths(argv):
        try:
            read_yaml(path, "config file")
        except ConfigError as error:
            problems.append(str(error))
    return "\n".join(problems) or None
