"""Glue for the thin Snakemake scripts: logging to the rule's log file and clean failures."""

from __future__ import annotations

import gc
import logging
import os
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


class _Absent:
    """A `sys.meta_path` finder for which one package and its submodules cannot be imported
    (importlib.abc is not imported for it: job start-up)."""

    def __init__(self, package: str) -> None:
        self.package = package

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == self.package or name.startswith(self.package + "."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


def without_pandas_probe() -> None:
    """Answer pyarrow's one question "is pandas installed?" with no, in a job that never
    builds a pandas object.

    pyarrow asks it once per process, by importing pandas (0.3-0.5 CPU-s), at its first
    conversion of a Python or numpy value (`pa.array`, `pa.scalar`, a compute call with a
    Python scalar, `to_numpy(zero_copy_only=False)`), only to tell whether the value is a
    pandas object. Here the question is asked while pandas cannot be imported, so pyarrow
    records "no pandas" and converts as it would any non-pandas value. Nothing is lost: a
    later call that needs pandas (`to_pandas`, `from_pandas`) imports it then (pyarrow
    retries; tests/test_lean_jobs.py checks both). Call it before the job's first Arrow
    conversion, in job scripts only: a process that already holds pandas objects keeps the
    usual check (nothing is done once pandas is loaded).
    """
    if "pandas" in sys.modules:
        return
    import pyarrow as pa

    finder = _Absent("pandas")
    sys.meta_path.insert(0, finder)
    try:
        pa.array([0])  # the question is asked here, once
    finally:
        sys.meta_path.remove(finder)


def single_threaded_blas() -> None:
    """Have numpy's BLAS (OpenBLAS) run matrix products in the job's own thread, unless the
    environment says otherwise; call it before anything imports numpy (pyarrow does).

    A job's products are small (the score job's bootstrap: two 1000 x 1,536 by 1,536 x 400
    products). OpenBLAS would start a thread per core at import and split each product
    among them; on a machine whose cores run other jobs, the threads' start-up and waiting
    cost more CPU than they save (a tenth of a CPU second per score job at the paper's
    scale, docs/performance.md). Each product's values do not depend on the thread count:
    OpenBLAS splits the output among threads, never a dot product's sum.
    """
    if "numpy" in sys.modules:
        return  # too late: its thread pool is running
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def import_pyarrow_without_numpy() -> None:
    """Import pyarrow while numpy cannot be imported, in a job script whose work never hands
    pyarrow a numpy value nor asks it for one (call it before anything imports pyarrow).

    pyarrow.lib imports numpy when it can (about 0.14 of the 0.26 CPU-s that `import pyarrow,
    pyarrow.parquet` costs a job), only to convert numpy values: it binds `np` (the module, or
    None) once, at its own import, and sets up its C++ numpy support then or never. Imported
    here without numpy, pyarrow reads, builds and writes Arrow data from Python values and
    buffers exactly as before. numpy stays importable afterwards, and dualcog imports it
    where it computes with it (the parser's bracket passes on texts with many brackets), but
    this process's pyarrow never converts to or from numpy: `to_numpy`, `np.asarray` of an
    Arrow array, `pa.array` of an ndarray or of numpy integer/bool scalars, numpy scalars in
    compute calls raise (ImportError, ArrowInvalid, TypeError); none was seen to give
    another result (numpy floats are Python floats, converted as usual).
    So it is for jobs whose Arrow work is in Python values (tests/test_lean_jobs.py runs them,
    checks numpy stays unloaded and that they write the bytes a normal run writes). It relies
    on pyarrow.lib's `try: import numpy ... except ImportError: np = None` (pyarrow 16 on;
    the same test file pins what it refuses); a pyarrow that requires numpy is imported as
    usual. Nothing is done once pyarrow or numpy is loaded.
    """
    if "pyarrow" in sys.modules or "numpy" in sys.modules:
        return
    finder = _Absent("numpy")
    sys.meta_path.insert(0, finder)
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        pass  # it requires numpy: imported with it below
    finally:
        sys.meta_path.remove(finder)
    import pyarrow  # noqa: F401, F811


def run_step(snakemake: Any, main: Callable[[Any], None]) -> None:
    """Run one rule's work with its log file set up; a known error exits with its message."""
    setup_logging(snakemake.log[0] if len(snakemake.log) else None)
    # What the imports made lives as long as the job: out of the collector's sight, its full
    # collections no longer walk it each time the job's own objects trigger one; and the
    # youngest generation is collected every 10,000 new containers rather than 700 (together
    # a fifth of a parse job's CPU at the paper's scale, docs/performance.md "Per-job cost").
    # Cycles are still collected. A caller that goes on (a test) gets its collector back as it was.
    thresholds = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(10_000, *thresholds[1:])
    started = time.perf_counter()
    try:
        main(snakemake)
    except DualCogError as exc:
        log.error("%s", exc)
        sys.exit(1)
    except Exception:
        log.exception("rule %s failed", getattr(snakemake, "rule", "?"))
        raise
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()
    # The worker processes a job waited for (explorer_media's) count as its own CPU.
    own, workers = (
        resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    log.info(
        "done in %.1f s (process CPU %.2f s, start-up and imports included)",
        time.perf_counter() - started,
        own.ru_utime + own.ru_stime + workers.ru_utime + workers.ru_stime,
    )
    if _process_ends_with_job(snakemake):
        _exit_now()


def _process_ends_with_job(snakemake: Any) -> bool:
    """A script job Snakemake started (its `snakemake` object is Snakemake's own), which runs
    in an interpreter of its own that ends with it, and no other Python thread is left."""
    return type(snakemake).__module__ == "snakemake.iocontainers" and threading.active_count() == 1


def _exit_now() -> None:
    """End the job's process with status 0 without the interpreter's teardown, which frees
    every module and object one by one (0.03-0.06 CPU-s a job once pyarrow and numpy are
    loaded, docs/performance.md). Every output is already written and closed; the log file,
    stdout and stderr are flushed here."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def progress_logger(prefix: str | None = None) -> Callable[[str], None]:
    """A sink for progress lines; `prefix` starts each line when the lines lack a label."""
    if prefix is None:
        return progress_log.info
    return lambda message: progress_log.info("%s: %s", prefix, message)
