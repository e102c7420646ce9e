"""The suite's Snakemake runs, forked from a process that has imported Snakemake
(tests/snakemake_fork.py), against the same command in an interpreter of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import snakemake_fork

pytestmark = pytest.mark.workflow

SNAKEFILE = """
import os, time

if os.environ.get("FORK_TEST_PAUSE"):
    time.sleep(float(os.environ["FORK_TEST_PAUSE"]))  # while the workflow is read: no job yet

rule all:
    output: "out.txt"
    shell: 'echo "$FORK_TEST_VALUE $(basename "$PWD")" > {output}'
"""


def _workdir(tmp_path: Path, name: str) -> Path:
    workdir = tmp_path / name
    workdir.mkdir()
    (workdir / "Snakefile").write_text(SNAKEFILE)
    return workdir


def _fresh(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "snakemake", *argv]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)


def _argv(workdir: Path, *extra: str) -> list[str]:
    return ["--snakefile", str(workdir / "Snakefile"), "--directory", str(workdir),
            "--cores", "1", *extra]  # fmt: skip


def test_a_forked_run_does_what_a_fresh_interpreter_does(tmp_path: Path) -> None:
    env = {**os.environ, "FORK_TEST_VALUE": "handed-over"}
    forked = snakemake_fork.run(_argv(_workdir(tmp_path, "forked")), env=env, timeout=120)
    fresh = _fresh(_argv(_workdir(tmp_path, "fresh")), env=env)
    assert forked.returncode == fresh.returncode == 0, forked.stderr + fresh.stderr
    # The job saw the environment given and ran in the run's directory.
    assert (tmp_path / "forked" / "out.txt").read_text() == "handed-over forked\n"
    assert (tmp_path / "fresh" / "out.txt").read_text() == "handed-over fresh\n"
    for result in (forked, fresh):
        assert "1 of 1 jobs done (100%)" in result.stderr  # the profile's logger (profiles/default)
    # A failure: the same exit status, its message on standard error.
    missing = ("no-such-file.txt",)
    failed = snakemake_fork.run(_argv(tmp_path / "forked", *missing), env=env, timeout=120)
    failed_fresh = _fresh(_argv(tmp_path / "fresh", *missing), env=env)
    assert failed.returncode == failed_fresh.returncode == 1
    assert "MissingRuleException" in failed.stderr and "MissingRuleException" in failed_fresh.stderr


def test_a_run_past_its_timeout_is_killed(tmp_path: Path) -> None:
    env = {**os.environ, "FORK_TEST_PAUSE": "120", "FORK_TEST_VALUE": "never"}
    with pytest.raises(subprocess.TimeoutExpired):
        snakemake_fork.run(_argv(_workdir(tmp_path, "slow")), env=env, timeout=2)
    assert not (tmp_path / "slow" / "out.txt").exists()
