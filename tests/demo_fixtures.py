"""One complete Snakemake run of the demo benchmark, shared by every test that only reads it.

`demo_workflow` runs it once per session (the models the workflow, explorer, stats and
download tests need, under one configuration); `demo_copy` gives a test its own copy to change
and rerun: the copy keeps every file's mtime and Snakemake's records, so only the jobs that a
change touches run again.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path

import pytest
import workflow_runner
from workflow_runner import REPO, run_snakemake, write_config

DEMO = REPO / "resources" / "demo"
DEMO_RECORDED_RUNS = sorted(DEMO.glob("**/experiments/demo_recorded_run/responses.jsonl"))

PERMILLE = "sim-permille-Instant"  # per-mille boxes in a code fence: only `compatible` recovers
CHATTY = "sim-chatty-Thinking"  # answers in frames (4), thinks aloud, renamed keys
PROSE = "sim-prose-Thinking"  # answers in prose; the explorer tests open its page
CLEAN = "sim-clean-Instant"
RECORDED = "recorded-Instant"  # the demo's recorded run, replayed from copies in the run

DEMO_MODELS: list[dict] = [
    {"name": "oracle", "backend": "oracle", "group": "baseline"},
    {"name": "random", "backend": "random", "group": "baseline", "seed": 3},
    {
        "name": PERMILLE,
        "backend": "simulated",
        "group": "open-weights",
        "seed": 5,
        "skill": 0.9,
        "quirks": ["per_mille", "fence"],
    },
    {
        "name": CHATTY,
        "backend": "simulated",
        "group": "proprietary",
        "seed": 6,
        "skill": 0.6,
        "quirks": ["think", "alias_keys", "reversed_corners"],
        "video_mode": "frames",
        "video_frames": 4,
    },
    {
        "name": PROSE,
        "backend": "simulated",
        "group": "proprietary",
        "seed": 13,
        "skill": 0.5,
        "quirks": ["think", "prose", "alias_keys", "reversed_corners"],
    },
    {"name": CLEAN, "backend": "simulated", "seed": 11, "skill": 0.75},
]
DEMO_COMPARE = [PERMILLE, "random"]
BOOTSTRAP = {"replicates": 400, "seed": 11}


def replay_model(workdir: Path) -> dict:
    """A replay model reading copies of the demo's recorded run, so tests may edit them."""
    copies = []
    for i, source in enumerate(DEMO_RECORDED_RUNS):
        target = workdir / "recorded" / f"{i}_responses.jsonl"
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists():
            shutil.copyfile(source, target)
        copies.append(str(target.relative_to(workdir)))
    return {"name": RECORDED, "backend": "replay", "replay": copies}


def demo_model_names() -> set[str]:
    return {model["name"] for model in DEMO_MODELS} | {RECORDED}


def write_demo_config(workdir: Path, models: list[dict] = DEMO_MODELS) -> None:
    """The shared run's configuration, with `models` (changed copies of DEMO_MODELS)."""
    config = {
        "data_root": str(DEMO),
        "cache_dir": "results/cache",
        "tables": {"formats": ["csv", "md", "tex", "html"]},  # every format: results pages
        "bootstrap": BOOTSTRAP,
        "compare": [DEMO_COMPARE],
        "models": [*models, replay_model(workdir)],
    }
    write_config(workdir, config)


@pytest.fixture(scope="session", autouse=True)
def shared_media_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's media store (workflow_runner.shared_media_store): in the folder every
    xdist worker of this session shares (a session of its own without xdist)."""
    base = tmp_path_factory.getbasetemp()
    store = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "media_store"
    workflow_runner.shared_media_store = store
    return store


@pytest.fixture(scope="session")
def demo_workflow(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The working directory of a complete demo run. Read it only; change a `demo_copy`."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):  # no xdist: this process is the session
        workdir = tmp_path_factory.mktemp("demo_workflow")
        write_demo_config(workdir)
        run_snakemake(workdir)
        return workdir
    # Under pytest-xdist every worker has its own session: the first to need the run makes it
    # in the folder all workers share, the others wait on the lock and read the same run.
    shared = tmp_path_factory.getbasetemp().parent
    workdir = shared / "demo_workflow"
    with (shared / "demo_workflow.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (shared / "demo_workflow.done").exists():
            shutil.rmtree(workdir, ignore_errors=True)  # a failed attempt's leftovers
            workdir.mkdir()
            write_demo_config(workdir)
            run_snakemake(workdir)
            (shared / "demo_workflow.done").touch()
    return workdir


# Snakemake's per-invocation state: a copy must not inherit the original's locks or logs.
_NOT_COPIED = shutil.ignore_patterns("locks", "incomplete", "log", "report.html")


def copy_run(source: Path, target: Path) -> Path:
    """`source` (a finished run) copied to `target` with mtimes, so it is up to date there."""
    shutil.copytree(source, target, symlinks=True, ignore=_NOT_COPIED)
    return target


@pytest.fixture
def demo_copy(demo_workflow: Path, tmp_path: Path) -> Path:
    """A private copy of the shared demo run that a test may change and rerun."""
    return copy_run(demo_workflow, tmp_path / "demo")
