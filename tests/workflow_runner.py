"""Run the real workflow in a temporary working directory, as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import snakemake_fork
import yaml

REPO = Path(__file__).resolve().parents[1]
# Where `make` installs snakemake-executor-plugin-slurm: off the path of every other Snakemake
# start-up, since the plugin imports pandas when Snakemake starts (Makefile).
SLURM_PLUGIN = Path(sys.prefix) / "slurm-plugin"


def slurm_plugin_path() -> Path:
    if not (SLURM_PLUGIN / "snakemake_executor_plugin_slurm").is_dir():
        raise AssertionError(f"snakemake-executor-plugin-slurm is missing from {SLURM_PLUGIN}")
    return SLURM_PLUGIN


def slurm_plugin_env() -> dict[str, str]:
    """The environment entry that lets Snakemake (and, through sbatch, its jobs) find it."""
    paths = [str(slurm_plugin_path()), os.environ.get("PYTHONPATH", "")]
    return {"PYTHONPATH": os.pathsep.join(filter(None, paths))}


# Set per test by conftest.py: only tests marked `workflow` may run Snakemake.
snakemake_allowed = True


# Set per session by demo_fixtures.py: one content-addressed media store for every run of the
# session whose configuration names none. A store holds each prepared image and video under
# the digest of its source's bytes and the settings (dualcog.media.store), so a run finds what
# an earlier run prepared from the same sources, as a user's rerun does; tests that check
# preparation itself give their own store or call the library.
shared_media_store: Path | None = None


def loopback_model(name: str, api_base: str, **settings: object) -> dict:
    """An `openai` model at a loopback server (tests/loopback_server.py) with the key from
    DUALCOG_LOOPBACK_KEY and no retries; `settings` add to or replace these."""
    return {
        "name": name,
        "backend": "openai",
        "group": "open-weights",
        "api_base": api_base,
        "api_key": "${DUALCOG_LOOPBACK_KEY}",
        "request_model": "loop/vlm",
        "family": "qwen_vllm",
        "max_retries": 0,
        **settings,
    }


def write_config(workdir: Path, config: Mapping) -> None:
    config = dict(config)
    if shared_media_store is not None and "media" not in config:
        config["media"] = {"store": str(shared_media_store)}
    (workdir / "config").mkdir(parents=True, exist_ok=True)
    (workdir / "config" / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


# `python -m snakemake` with the SLURM plugin on this process's path only: its SLURM jobs
# (`--export=ALL`) then start their Snakemakes (slurm-jobstep) without importing it.
_WITH_SLURM_PLUGIN = (
    "import runpy, sys; sys.path.insert(0, sys.argv.pop(1)); "
    "runpy.run_module('snakemake', run_name='__main__', alter_sys=True)"
)


TIMEOUT_S = 600


def run_snakemake(
    workdir: Path,
    *args: str,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    slurm_plugin: bool = False,
    timeout: float = TIMEOUT_S,
) -> subprocess.CompletedProcess:
    """Snakemake on the repository's Snakefile in `workdir`, forked from a process that has
    imported it (tests/snakemake_fork.py) unless it needs an interpreter of its own:
    `slurm_plugin` (the main process finds snakemake-executor-plugin-slurm, its jobs do not:
    0.34 CPU-s less per job's Snakemake start-up; slurm_plugin_env hands it to the jobs too)
    or a PYTHON* variable in `env`, which Python reads only when it starts."""
    if not snakemake_allowed:
        raise AssertionError("this test runs Snakemake: mark it `workflow` (pytestmark)")
    argv = [
        "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir), "--cores", "2", *args,
    ]  # fmt: skip
    environment = {**os.environ, **(env or {})}
    if not slurm_plugin and not any(name.startswith("PYTHON") for name in env or {}):
        result = snakemake_fork.run(argv, env=environment, timeout=timeout)
    else:
        if slurm_plugin:
            launcher = ["-c", _WITH_SLURM_PLUGIN, str(slurm_plugin_path())]
        else:
            launcher = ["-m", "snakemake"]
        result = subprocess.run(
            [sys.executable, *launcher, *argv],
            capture_output=True, text=True, timeout=timeout, env=environment,
        )  # fmt: skip
    if check and result.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{result.stderr[-4000:]}")
    return result
