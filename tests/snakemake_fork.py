"""Snakemake's command line, run in a process forked from one that has imported it already.

Importing Snakemake costs about 1.1 CPU-s per start-up (its persistence layer pulls in
SQLModel and SQLAlchemy, its report module yte and numpy), more than many of the suite's runs
spend on their work. A forkserver (multiprocessing's, one per test process) imports it once;
each run is a fresh child of it with its own working directory, environment and output files,
and from there on the same `snakemake` command a user types: the same argument parsing, the
same jobs started as processes of their own. What a fresh interpreter reads at its start-up
(PYTHON* variables, a plugin on the path) cannot reach a forked child: workflow_runner starts
those runs as processes of their own.

Standard library only: the forkserver imports this module to find the child's entry point.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.forkserver
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent

PRELOAD = "snakemake_preload"  # tests/snakemake_preload.py
_context: multiprocessing.context.ForkServerContext | None = None


def _forkserver() -> multiprocessing.context.ForkServerContext:
    global _context
    if _context is None:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([PRELOAD])
        # The forkserver imports it at its start, from the path it starts with: Python 3.11's
        # forkserver drops the sys.path it is handed, so this folder goes by the environment.
        previous = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), previous]))
        try:
            multiprocessing.forkserver.ensure_running()
        finally:
            if previous is None:
                del os.environ["PYTHONPATH"]
            else:
                os.environ["PYTHONPATH"] = previous
        _context = context
    return _context


def _child(argv: list[str], cwd: str, env: dict[str, str], stdout: str, stderr: str) -> None:
    """The child's whole life: as `python -m snakemake ARGV` would start, then Snakemake."""
    preloaded = sys.modules.get(PRELOAD)
    if preloaded is None:  # a failed preload is silent in the forkserver: not here
        raise RuntimeError(f"the forkserver did not import {PRELOAD} (tests/{PRELOAD}.py)")
    sys.path[:] = preloaded.FRESH_SYS_PATH
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    # File descriptors, not just sys.stdout: the jobs Snakemake starts write there too.
    for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, stdout, os.O_WRONLY),
                            (2, stderr, os.O_WRONLY)):  # fmt: skip
        opened = os.open(path, flags)
        os.dup2(opened, fd)
        os.close(opened)
    import snakemake
    from snakemake.cli import main  # imported by the forkserver: no cost here

    sys.argv = [str(Path(snakemake.__file__).with_name("__main__.py")), *argv]  # as with -m
    main(argv)  # exits through SystemExit, which multiprocessing turns into the exit code


def run(argv: Sequence[str], env: Mapping[str, str], timeout: float) -> subprocess.CompletedProcess:
    """`snakemake ARGV` in the current directory with `env` as its whole environment; what
    `subprocess.run(..., capture_output=True, text=True, timeout=timeout)` would return."""
    with tempfile.TemporaryDirectory(prefix="snakemake-fork-") as scratch:
        stdout, stderr = Path(scratch, "stdout"), Path(scratch, "stderr")
        stdout.touch()
        stderr.touch()
        child = _forkserver().Process(
            target=_child, args=(list(argv), os.getcwd(), dict(env), str(stdout), str(stderr))
        )
        child.start()
        child.join(timeout)
        if child.exitcode is None:
            child.kill()
            child.join()
            raise subprocess.TimeoutExpired(["snakemake", *argv], timeout)
        return subprocess.CompletedProcess(
            ["snakemake", *argv],
            child.exitcode,
            stdout.read_text(errors="replace"),
            stderr.read_text(errors="replace"),
        )
