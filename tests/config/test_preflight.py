"""Preflight (every problem before any job, by model) and user configs that never inherit the
demo's settings."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from workflow_runner import REPO, run_snakemake, write_config

from dualcog.config import validate_config
from dualcog.preflight import check, report, server_problems

DEMO = str(REPO / "resources" / "demo")


def problems_of(config: dict, environ: dict | None = None) -> list[tuple[str, str]]:
    return [(p.subject, p.message) for p in check(validate_config(config), environ or {})]


def test_a_ready_config_has_no_problems() -> None:
    config = {"data_root": DEMO, "models": [{"name": "oracle", "backend": "oracle"}]}
    assert problems_of(config) == []


def test_every_problem_at_once_by_model(tmp_path: Path) -> None:
    empty_root = tmp_path / "empty"
    empty_root.mkdir()
    config = {
        "data_root": str(empty_root),
        "models": [
            {"name": "oracle", "backend": "oracle"},
            {"name": "gone", "backend": "replay", "replay": [str(tmp_path / "nope.jsonl")]},
            {
                "name": "remote-Instant",
                "backend": "openai",
                "family": "glm",
                "api_base": "${REMOTE_BASE}",
                "api_key": "${REMOTE_KEY}",
            },
            {
                "name": "local-Instant",
                "backend": "openai",
                "family": "qwen_vllm",
                "serve": {"model": "${LOCAL_WEIGHTS}"},
            },
        ],
    }
    found = problems_of(config, {"REMOTE_BASE": "http://x/v1"})
    assert found[0][0] == "data_root" and str(empty_root) in found[0][1]
    assert "no manifests found" in found[0][1]
    assert found[1:] == [
        ("model gone", f"replay file {tmp_path / 'nope.jsonl'} does not exist"),
        ("model remote-Instant", "${REMOTE_KEY} (api_key) is not set"),
        ("model local-Instant", "${LOCAL_WEIGHTS} (serve.model) is not set"),
    ]
    text = report(check(validate_config(config), {}), "my.yaml")
    assert text.startswith("5 problem(s) in my.yaml; nothing was run:")
    assert "  REMOTE_KEY: 1 (remote-Instant)" in text
    assert "  model remote-Instant: ${REMOTE_BASE} (api_base) is not set; ${REMOTE_KEY}" in text
    # A model's key is never written in a file: the fixes named are exporting and dropping.
    assert "missing environment variables (export them, or drop the models that need them):" in text
    assert "profile" not in text
    with_profile = report(
        check(validate_config(config), {}, profile={"set-resources infer:slurm_account": "$ACC"}),
        "my.yaml",
    )
    assert "  profile: $ACC (set-resources infer:slurm_account) is not set" in with_profile
    assert "or write the profile's resource values without them):" in with_profile


def test_data_root_missing_or_unset(tmp_path: Path) -> None:
    base = {"models": [{"name": "oracle", "backend": "oracle"}]}
    assert problems_of({**base, "data_root": str(tmp_path / "x")}) == [
        ("data_root", f"{tmp_path / 'x'} does not exist")
    ]
    assert problems_of({**base, "data_root": "${MY_DATA}"}) == [
        ("data_root", "${MY_DATA} is not set")
    ]


def test_data_root_from_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("MY_DATA", DEMO)
    config = validate_config(
        {"data_root": "${MY_DATA}", "models": [{"name": "o", "backend": "oracle"}]}
    )
    assert config["data_root"] == DEMO and check(config, {}) == []


@pytest.mark.workflow
def test_user_config_without_data_root_fails_and_never_inherits_the_demo(tmp_path: Path) -> None:
    # A workflow folder whose config/config.yaml is the demo, as in a fresh clone.
    demo = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    demo["data_root"] = DEMO
    demo["tables"] = {"formats": ["tex"]}
    for model in demo["models"]:
        if model["backend"] == "replay":
            model["replay"] = [str(REPO / path) for path in model["replay"]]
    write_config(tmp_path, demo)
    mine = tmp_path / "my.yaml"
    mine.write_text(yaml.safe_dump({"models": [{"name": "mine", "backend": "random"}]}))
    result = run_snakemake(tmp_path, "-n", "--configfile", str(mine), check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert f"invalid configuration in {mine}: no `data_root`" in output
    assert "does not inherit the demo's settings" in output

    mine.write_text(
        yaml.safe_dump({"data_root": DEMO, "models": [{"name": "mine", "backend": "random"}]})
    )
    plan = run_snakemake(tmp_path, "-n", "--configfile", str(mine)).stdout
    assert "results/responses/mine/" in plan
    assert "oracle" not in plan and "sim-clean" not in plan  # demo models are not merged in
    assert (
        ".tex" not in plan and "results/tables/overall.md" in plan
    )  # the defaults, not the demo's
    # Without --configfile the folder's config/config.yaml is the configuration.
    assert "results/responses/oracle/" in run_snakemake(tmp_path, "-n").stdout


def test_two_copies_of_the_benchmark_are_refused_naming_both_manifests(tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "scratch"
    shutil.copytree(DEMO, root / "copy1")
    shutil.copytree(DEMO, root / "copy2")
    config = {"data_root": str(root), "models": [{"name": "oracle", "backend": "oracle"}]}
    [(subject, message)] = problems_of(config)
    assert subject == "data_root"
    assert "appear in two manifests" in message
    import re

    sample, first, twin = re.search(r"sample (\S+) in (\S+) and in (\S+?);", message).groups()
    first, twin = Path(first), Path(twin)
    assert first.relative_to(root / "copy1") == twin.relative_to(root / "copy2")
    assert sample in first.read_text()


@pytest.mark.workflow
def test_served_model_without_vllm_is_named_before_any_job(tmp_path: Path) -> None:
    """A `serve:` model whose server command is not installed here: found at start, not when
    its job starts (only where its server would start here: not for dry runs or conda)."""
    model = {
        "name": "local-Instant",
        "backend": "openai",
        "family": "qwen_vllm",
        "serve": {"model": "weights", "command": [str(tmp_path / "no-vllm-here"), "serve"]},
    }
    config = validate_config({"data_root": DEMO, "models": [model]})
    assert check(config, {}) == []
    (problem,) = server_problems(config)
    assert problem.subject == "model local-Instant"
    assert "no-vllm-here" in problem.message and "not on PATH" in problem.message
    write_config(tmp_path, {"data_root": DEMO, "models": [model]})
    assert run_snakemake(tmp_path, "--dry-run").returncode == 0  # may plan for another machine
    result = run_snakemake(tmp_path, check=False)
    assert result.returncode != 0 and "no-vllm-here' is not on PATH" in result.stderr
    assert not (tmp_path / "results").exists()
