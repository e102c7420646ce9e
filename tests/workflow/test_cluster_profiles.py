"""profiles/slurm: every entry explained, and its rule names and job caps match the workflow."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import yaml
from test_cluster_executor import _demo_config
from test_media_dag import ENV as MEDIA_DAG_ENV
from test_media_dag import SENDER
from workflow_runner import REPO, run_snakemake, slurm_plugin_env, write_config

from dualcog.cluster import provider_resources
from dualcog.config import validate_config
from dualcog.serving.server import served_groups

PROFILE = REPO / "profiles" / "slurm"
PLACEHOLDERS = {
    "DUALCOG_SLURM_ACCOUNT": "acct-x",
    "DUALCOG_SLURM_PARTITION": "cpu-x",
    "DUALCOG_SLURM_GPU_PARTITION": "gpu-x",
    "DUALCOG_SLURM_EGRESS_PARTITION": "egress-x",
}


def _profile() -> dict:
    return yaml.safe_load((PROFILE / "config.yaml").read_text())


def _paper_models() -> list[dict]:
    config = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())
    return validate_config(config, "config/paper.yaml")["models"]


def test_every_top_level_entry_has_a_comment() -> None:
    lines = (PROFILE / "config.yaml").read_text().splitlines()
    for number, line in enumerate(lines):
        if re.match(r"^[a-z][\w-]*:", line):
            commented = "#" in line or lines[number - 1].startswith("#")
            assert commented, f"profiles/slurm/config.yaml:{number + 1}: {line!r} is unexplained"


def test_served_models_of_the_paper_config_get_a_gpu_partition() -> None:
    served = {group.rule_name for group in served_groups(_paper_models())}
    assert len(served) == 9
    resources = _profile()["set-resources"]
    assert served == {rule for rule in resources if rule.startswith("infer_served_")}
    for rule in served:
        assert resources[rule]["slurm_partition"] == "$DUALCOG_SLURM_GPU_PARTITION"


def test_each_api_of_the_paper_config_has_a_job_cap() -> None:
    caps = {name for name in _profile()["resources"] if name != "api_slots"}
    assert caps == set(provider_resources(_paper_models()))


@pytest.mark.workflow
def test_the_profile_reaches_the_jobs(tmp_path) -> None:
    config = _demo_config()
    # A model that is sent media, so that the media preparation jobs are in the DAG.
    config["models"].append(SENDER)
    write_config(tmp_path, config)
    env = {**PLACEHOLDERS, **MEDIA_DAG_ENV, **slurm_plugin_env()}  # the profile's executor
    result = run_snakemake(tmp_path, "--dry-run", "--profile", str(PROFILE), env=env)
    job = r"^(?:local)?rule (\w+):.*?\n    resources: ([^\n]*)"
    jobs = dict(re.findall(job, result.stdout, re.M | re.S))
    assert "slurm_account=acct-x" in jobs["score"] and "slurm_partition=cpu-x" in jobs["score"]
    assert "slurm_partition=egress-x" in jobs["infer_api"] and "runtime=2880" in jobs["infer_api"]
    assert "cpus_per_task=8" in jobs["prepare_images"] and "mem_mb=16000" in jobs["prepare_images"]


def test_the_submission_rate_is_one_snakemake_honours() -> None:
    """Snakemake 9 always sets --max-jobs-per-timespan (default 100/1s), which overrides the
    older max-jobs-per-second: the profile must use the former to limit anything."""
    # Snakemake's own parser, in a process that finds the profile's executor (the SLURM
    # plugin, kept off this one's path: Makefile).
    parse = (
        "import sys\nfrom snakemake.cli import parse_args\n"
        "_, args = parse_args(sys.argv[1:])\n"
        "print(args.max_jobs_per_timespan.max_jobs, args.max_jobs_per_timespan.timespan)"
    )
    result = subprocess.run(
        [sys.executable, "-c", parse, "--profile", str(PROFILE), "--dry-run"],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, **PLACEHOLDERS, **slurm_plugin_env()},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    max_jobs, timespan = result.stdout.split()
    assert (int(max_jobs), float(timespan)) == (5, 1)
    assert "max-jobs-per-second" not in _profile()


@pytest.mark.workflow
def test_a_dry_run_without_the_placeholder_exports_names_them(tmp_path, monkeypatch) -> None:
    for name in PLACEHOLDERS:
        monkeypatch.delenv(name, raising=False)
    write_config(tmp_path, _demo_config())
    result = run_snakemake(
        tmp_path, "--dry-run", "--profile", str(PROFILE), env=slurm_plugin_env(), check=False
    )
    output = result.stdout + result.stderr
    assert result.returncode != 0, output[-2000:]
    assert "nothing was run" in output
    for name in PLACEHOLDERS:
        assert f"${name}" in output
    assert "$DUALCOG_SLURM_ACCOUNT (default-resources slurm_account) is not set" in output


def test_profile_placeholders_are_found_in_either_spelling() -> None:
    from dualcog.preflight import profile_problems

    settings = {"a": "$SET_ONE", "b": "x-${UNSET_TWO}-y", "c": "plain", "d": "$UNSET_THREE"}
    found = [(p.variable, p.message) for p in profile_problems(settings, {"SET_ONE": "1"})]
    assert found == [
        ("UNSET_TWO", "$UNSET_TWO (b) is not set"),
        ("UNSET_THREE", "$UNSET_THREE (d) is not set"),
    ]
