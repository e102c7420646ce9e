"""Glue for the thin Snakemake scripts: logging to the rule's log file and clean failures."""

from __future__ import annotations

import logging
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dualcog.errors import DualCogError

log = logging.getLogger("dualcog")


def setup_logging(log_path: str | Path | None) -> None:
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_path:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(log_path, mode="w", encoding="utf-8"))
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
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
    usage = resource.getrusage(resource.RUSAGE_SELF)
    log.info(
        "done in %.1f s (process CPU %.2f s, start-up and imports included)",
        time.perf_counter() - started,
        usage.ru_utime + usage.ru_stime,
    )


def progress_logger(prefix: str) -> Callable[[str], None]:
    return lambda message: log.info("%s: %s", prefix, message)
