"""config/paper.yaml against the seed page's model lists (tests/data/seed_models.yaml)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml
from workflow_runner import REPO, run_snakemake

from dualcog.config import load_config
from dualcog.inference.request import request_settings
from dualcog.switches import authors_family, split_mode

SEED = yaml.safe_load((Path(__file__).parents[1] / "data" / "seed_models.yaml").read_text())
PROVIDERS = ("API_ROUTE", "OPENROUTER", "SILICONFLOW", "DASHSCOPE", "ZHIPU", "MIMO", "SHLAB")
EXTRAS = (" (Thinking)", " (Thinking-High)")


def base_display(model: dict) -> str:
    """The display name without the mode an extra run adds to it."""
    name = model["display_name"]
    for extra in EXTRAS:
        name = name.removesuffix(extra)
    return name


def dummy_environment() -> dict[str, str]:
    env = {"DUALCOG_DATA_ROOT": str(REPO / "resources" / "demo")}
    env["INTERNVL_THINK_SYSTEM_PROMPT"] = "Think step by step inside <think></think>. "
    for provider in PROVIDERS:
        env[f"{provider}_BASE_URL"] = "http://127.0.0.1:9/v1"
        env[f"{provider}_API_KEY"] = f"dummy-{provider.lower()}"
    return env


@pytest.fixture
def paper(monkeypatch: pytest.MonkeyPatch) -> dict:
    for name, value in dummy_environment().items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(REPO)
    return load_config(REPO / "config" / "paper.yaml")


def main_runs(config: dict) -> dict[str, dict]:
    """Display name -> the run of its main-table row (`main_table`, default true)."""
    rows = {}
    for model in config["models"]:
        if model["main_table"]:
            assert model["display_name"] not in rows, model["display_name"]
            rows[model["display_name"]] = model
    return rows


def test_the_45_models_and_their_groups(paper) -> None:
    rows = main_runs(paper)
    expected = {name: group for group, names in SEED["groups"].items() for name in names}
    assert len(expected) == 45
    assert {name: model["group"] for name, model in rows.items()} == expected
    counts = {group: len(names) for group, names in SEED["groups"].items()}
    assert counts == {"proprietary": 21, "open-weights": 20, "spatial": 4}
    shown = {}
    for model in rows.values():
        shown[model["group"]] = shown.get(model["group"], 0) + 1
    assert shown == counts


def test_the_extra_runs_are_off_the_main_tables(paper) -> None:
    # The main tables show one row per model; the extra runs appear in the audit only: the
    # -Thinking and -Thinking-High runs of the 45, and the audit's models outside the 45.
    extras = [m for m in paper["models"] if not m["main_table"]]
    assert len(paper["models"]) == 60 and len(extras) == 15
    outside = {run.rsplit(" (", 1)[0] for run in SEED["audit_runs_other"]} - set(main_runs(paper))
    assert outside == {"claude-opus-4-5-20251101-fastai", "mimo-v2-pro"}
    for model in extras:
        mode = split_mode(model["name"])[1]
        if base_display(model) in outside:
            continue
        assert model["display_name"] == f"{base_display(model)} ({mode})"
        assert base_display(model) in main_runs(paper) and mode in ("Thinking", "Thinking-High")
    assert sum(base_display(m) in outside for m in extras) == 3


def test_channels_local_and_api(paper) -> None:
    rows = main_runs(paper)
    local = {name for name, model in rows.items() if model["channel"] == "local"}
    assert local == set(SEED["local"]) and len(rows) - len(local) == 36
    for model in paper["models"]:
        if model["channel"] == "local":
            assert model["serve"]["model"] and "api_base" not in model
        else:
            # Endpoints and keys stay `${VAR}` references, read only when a request is sent.
            assert "serve" not in model and re.fullmatch(
                r"\$\{[A-Z_]+_BASE_URL\}", model["api_base"]
            )


def test_t_marks(paper) -> None:
    # T on the reasoning-only models' rows, their Thinking-High runs included (§11.3).
    marked = {base_display(m) for m in paper["models"] if m["reasoning_only"]}
    assert marked == set(SEED["reasoning_only"])
    muse = main_runs(paper)["Muse Spark 1.3 Contributor"]
    assert split_mode(muse["name"])[1] == "Reasoning" and muse["reasoning_effort"] == "minimal"
    for model in paper["models"]:
        if model["reasoning_only"]:
            body = request_settings(model).extra_body
            high = split_mode(model["name"])[1] == "Thinking-High"
            effort = "minimal" if model is muse else "high" if high else "low"
            assert body == {"reasoning": {"enabled": True, "effort": effort}}, model["name"]


def test_every_audit_run_is_a_run(paper) -> None:
    runs = {}
    for model in paper["models"]:
        mode = split_mode(model["name"])[1]
        runs[f"{base_display(model)} ({mode})" if mode else base_display(model)] = model["name"]
    audit = SEED["audit_runs"] + SEED["audit_runs_other"]
    missing = [run for run in audit if run not in runs]
    assert missing == []
    # No extra run the audit does not name.
    extras = [m for m in paper["models"] if not m["main_table"]]
    named = {run for run, name in runs.items() if name in {m["name"] for m in extras}}
    assert named <= set(audit)


def test_families_only_where_the_rules_recognise_none(paper) -> None:
    """PROTOCOL §11.2: the authors' rules decide; the paper configuration overrides nothing."""
    source = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())["models"]
    for written, model in zip(source, paper["models"], strict=True):
        base = split_mode(model["name"])[0]
        assert not written.get("override_family")
        assert ("family" in written) == (authors_family(base) is None)
        assert model.get("family") == (authors_family(base) or written.get("family"))


def test_every_run_resolves_to_a_switch(paper) -> None:
    for model in paper["models"]:
        base, mode = split_mode(model["name"])
        if mode is not None:
            assert model["family"], model["name"]
        assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+-]*", model["name"])
        if model["channel"] == "api":
            assert model["api_key"].startswith("${") and model["request_model"] == base


OFF, ON = {"reasoning": {"enabled": False}}, {"reasoning": {"enabled": True}}
LOW = {"reasoning": {"enabled": True, "effort": "low"}}
HIGH = {"reasoning": {"enabled": True, "effort": "high"}}
QWEN_OFF = {"chat_template_kwargs": {"enable_thinking": False}}
DASH_OFF = {"enable_thinking": False}
DISABLED = {"thinking": {"type": "disabled"}}
INTERNVL_OFF = {"continue_final_message": True, "add_generation_prompt": False}
# Each run's switch, read off the controls table of UPSTREAM_FORMAT §5 by hand (PROTOCOL §11.3
# for effort; a family in parentheses is configured: no rule recognises the name).
SWITCHES = {
    "Claude-Opus-4.6-Thinking": LOW, "Claude-Opus-4.6-Thinking-High": HIGH,
    "Claude-Opus-4.7-Thinking": LOW, "Claude-Opus-4.8-Thinking": LOW,
    "Claude-Opus-4.8-Thinking-High": HIGH, "Claude-Sonnet-4.6-Instant": OFF,
    "Gemini-3-Flash-Instant": OFF, "Gemini-3.1-Flash-Lite-Instant": OFF,
    "Gemini-3.1-Pro-Preview-Thinking": LOW, "Gemini-3.8-Flash-Instant": OFF,
    "GPT-5.3": {}, "GPT-5.4-Instant": OFF, "GPT-5.4-Thinking": ON,  # (openrouter)
    "GPT-5.5-Instant": OFF, "GPT-5.5-Thinking": ON, "GPT-5.5-Thinking-High": HIGH,
    "GPT-5.6-Sol-Instant": OFF, "GPT-5.6-Terra-Instant": OFF, "GPT-6-Astra-Instant": OFF,
    "MiMo-V2-Omni-Instant": DISABLED, "MiMo-V2-Omni-Thinking": {},
    "Muse-Spark-1.3-Contributor-Reasoning": {"reasoning": {"enabled": True, "effort": "minimal"}},
    "Qwen3.5-Flash-Instant": DASH_OFF, "Qwen3.5-Plus-Instant": DASH_OFF,
    "Qwen3.6-Flash-Instant": QWEN_OFF, "Qwen3.6-Plus-Instant": DASH_OFF,
    "Qwen3.7-Plus-Instant": QWEN_OFF, "Qwen3.7-Plus-Thinking": {},
    "claude-opus-4-5-20251101-fastai-Thinking": ON,
    "claude-opus-4-5-20251101-fastai-Thinking-High": HIGH,
    "mimo-v2-pro-Instant": DISABLED,  # (glm)
    "Qwen3.5-4B-Instant": QWEN_OFF, "Qwen3.5-4B-Thinking": {},
    "Qwen3.5-9B-Instant": QWEN_OFF, "Qwen3.5-9B-Thinking": {},
    "Qwen3.5-27B-Instant": QWEN_OFF, "Qwen3.5-35B-A3B-Instant": QWEN_OFF,
    "Qwen3.5-122B-A10B-Instant": QWEN_OFF, "Qwen3.5-397B-A17B-Instant": QWEN_OFF,
    "Qwen3.6-27B-Instant": QWEN_OFF, "Qwen3.8-27B-Instant": QWEN_OFF,
    "InternVL-3.5-4B-Instant": INTERNVL_OFF, "InternVL-3.5-4B-Thinking": {},
    "InternVL-3.5-8B-Instant": INTERNVL_OFF, "InternVL-3.5-8B-Thinking": {},
    "InternVL-3.5-14B-Instant": INTERNVL_OFF, "InternVL-3.5-30B-A3B-Instant": INTERNVL_OFF,
    "InternVL-3.5-241B-A28B-Instant": INTERNVL_OFF,
    "Intern-S1-Pro-Instant": {"thinking_mode": False},
    "Kimi-K2.5-Instant": DASH_OFF, "Kimi-K2.6-Instant": DASH_OFF,  # (dashscope)
    "GLM-4.5V-Instant": DISABLED, "GLM-4.6V-Instant": DISABLED,  # 4.5V: (glm)
    "GLM-5.3-Flash-Instant": DISABLED, "MiMo-V2.5-Instant": DISABLED,  # (glm)
    "MiMo-V2.5-Thinking": {},  # (glm)
    "SpaceOm-Instant": QWEN_OFF, "SpaceR-Instant": QWEN_OFF,
    "SpaceThinker-Qwen2.5VL-Instant": QWEN_OFF, "ViLaSR-Instant": QWEN_OFF,
}  # fmt: skip


def test_every_run_sends_the_switch_of_the_rules(paper) -> None:
    assert {m["name"] for m in paper["models"]} == set(SWITCHES)
    for model in paper["models"]:
        settings = request_settings(model)
        assert settings.extra_body == SWITCHES[model["name"]], model["name"]
        internvl = model["name"].startswith("InternVL")
        mode = split_mode(model["name"])[1]
        assert settings.assistant_prefill == (
            "<think>\n</think>" if internvl and mode == "Instant" else None
        )
        assert bool(settings.system_prefix) == (internvl and mode == "Thinking")


def test_served_qwen_and_internvl_run_the_authors_example_server(paper) -> None:
    example = ["--reasoning-parser", "qwen3", "--max-model-len", "32K", "--kv-cache-dtype", "fp8",
               "--max-num-seqs", "8", "--max-num-batched-tokens", "16K",
               "--enable-prefix-caching", "--tensor-parallel-size", "1",
               "--gpu-memory-utilization", "0.90"]  # fmt: skip
    served = [m for m in paper["models"] if "serve" in m]
    ours = [m for m in served if m["name"].startswith(("Qwen3.5-", "InternVL-3.5-"))]
    assert len(ours) == 9 and len(served) == 13
    for model in ours:
        assert model["serve"]["args"][: len(example)] == example, model["name"]


@pytest.mark.workflow
def test_dry_run_plans_the_full_paper_dag(tmp_path: Path) -> None:
    (tmp_path / "config").mkdir()
    for name in ("paper.yaml", "paper_routes.yaml"):
        shutil.copy(REPO / "config" / name, tmp_path / "config" / name)
    config = "config/paper.yaml"
    result = run_snakemake(tmp_path, "-n", "--configfile", config, env=dummy_environment())
    jobs = {job: int(n) for job, n in re.findall(r"^(\w+)\s+(\d+)$", result.stdout, re.M)}
    served = {job: n for job, n in jobs.items() if job.startswith("infer_served_")}
    # 13 of the 60 runs are local (9 models, four with a -Thinking run too): one server job per
    # local model; the 47 API runs are answered by one job (rules/api.smk), no `infer` job.
    assert len(served) == 9 and set(served.values()) == {1}
    assert jobs["infer_api"] == 1 and "infer" not in jobs
    # Every run is parsed and scored by one `score` job (none is replayed or built in).
    assert jobs["score"] == 60 and "parse" not in jobs and jobs["tables"] == 1
    assert result.stdout.count("gpu=1") == 9

    missing = run_snakemake(tmp_path, "-n", "--configfile", config, check=False, env={})
    output = missing.stdout + missing.stderr  # Snakemake prints the error on stdout
    assert missing.returncode != 0 and "nothing was run" in output
    assert "OPENROUTER_API_KEY: 5 (" in output
    assert "model GPT-5.3: ${OPENROUTER_BASE_URL} (api_base) is not set" in output
    assert "rule " not in output  # stopped before planning any job
