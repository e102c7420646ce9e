"""Glue for the thin Snakemake scripts: logging to the rule's log file and clean failures."""

from __future__ import annotations

import logging
import resource
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dualcog.errors import DualCogError

log = logging.getLogger("dualcog")
# Progress lines (rate-limited by their reporters) also reach the console; other INFO lines
# go to the job's log file only, so a run's console stays a line per job start and end.
progress_log = logging.getLogger("dualcog.progress")


def _console_worthy(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.WARNING or record.name == progress_log.name


LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


@contextmanager
def thread_log(path: str | Path) -> Iterator[None]:
    """Within it, this thread's log records also go to `path` (a job that runs several units
    side by side, each in a thread, gives each unit the log a job of its own would have)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, mode="w", encoding="utf-8")
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    ident = threading.get_ident()
    handler.addFilter(lambda record: record.thread == ident)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
        handler.close()


def setup_logging(log_path: str | Path | None) -> None:
    console = logging.StreamHandler(sys.stderr)
    handlers: list[logging.Handler] = [console]
    if log_path:
        console.addFilter(_console_worthy)  # without a log file, everything stays on stderr
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(log_path, mode="w", encoding="utf-8"))
    logging.basicConfig(
        level=logging.INFO,
        format=LOG_FORMAT,
        handlers=handlers,
        force=True,
    )


def run_step(snakemake: Any, main: Callable[[Any], None]) -> None:
    """Run one rule's work with its log file set up; a known error exits with its message."""
    setup_logging(snakemake.log[0] if len(snakemake.log) else None)
    started = time.perf_counter()
    try:
        main(snakemake)
    except DualCogError as exc:
        log.error("%s", exc)
        sys.exit(1)
    except Exception:
        log.exception("rule %s failed", getattr(snakemake, "rule", "?"))
        raise
    # The worker processes a job waited for (explorer_media's) count as its own CPU.
    own, workers = (
        resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    log.info(
        "done in %.1f s (process CPU %.2f s, start-up and imports included)",
        time.perf_counter() - started,
        own.ru_utime + own.ru_stime + workers.ru_utime + workers.ru_stime,
    )


def progress_logger(prefix: str | None = None) -> Callable[[str], None]:
    """A sink for progress lines; `prefix` starts each line when the lines lack a label."""
    if prefix is None:
        return progress_log.info
    return lambda message: progress_log.info("%s: %s", prefix, message)
