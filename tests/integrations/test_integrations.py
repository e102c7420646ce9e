"""The integrations on the demo: the inspect_ai task gives the workflow's numbers for the same
answers; the exports validate against the Hub's and Every Eval Ever's formats; the dataset
folder loads with `datasets`; MLflow's file store holds the run's metrics.

One copy of the shared demo run gains a replay model whose answers (taken from two simulated
models, one answer per distinct request) inspect's `mockllm` serves too, and an `mlflow:`
block; one Snakemake call then makes `exports`, `hf_dataset` and the MLflow log.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import workflow_runner
import yaml
from demo_fixtures import CHATTY, DEMO, PERMILLE, copy_run
from workflow_runner import REPO, run_snakemake

from dualcog.inference.request import DEFAULT_MAX_TOKENS, DEFAULT_TEMPERATURE
from dualcog.ingest import ingest
from dualcog.integrations.evaluation import metric_values
from dualcog.stamp import read_stamp, stamp_digest
from dualcog.tasks import IMAGE_TASKS, REQUEST_KINDS

# inspect_ai warns of its own deprecated call (tenacity) once per sample.
pytestmark = [
    pytest.mark.workflow,
    pytest.mark.filterwarnings("ignore:The .initial. parameter is deprecated:DeprecationWarning"),
]

REPLAY = "inspect-replay-Instant"
EEE_TARGET = REPO / ".venv" / "every-eval-ever"  # installed there by the Makefile (Python ≥ 3.12)


def media_digest(ref: str) -> str:
    """A medium's bytes' digest, whether inspect holds it as a path or a data URI."""
    if ref.startswith("data:"):
        data = base64.b64decode(ref.split(",", 1)[1])
    else:
        data = Path(ref).read_bytes()
    return hashlib.sha256(data).hexdigest()


def request_of(messages) -> str:
    """What a request is made of (texts, media bytes): the key the mock answers by."""
    parts = []
    for message in messages:
        content = message.content
        if isinstance(content, str):
            parts.append(content)
        else:
            parts.append(
                [
                    getattr(block, "text", None)
                    or media_digest(getattr(block, "image", None) or block.video)
                    for block in content
                ]
            )
    return json.dumps(parts)


def replay_answers(run: Path) -> dict[str, str]:
    """sample id -> answer: the permille run's on image tasks, the chatty run's on video
    tasks, and one answer per distinct request (two demo samples share one)."""
    texts = {}
    for model, tasks in ((PERMILLE, IMAGE_TASKS), (CHATTY, ("behavior", "landmark_visibility"))):
        for task in tasks:
            table = pq.read_table(run / "results" / "responses" / model / f"{task}.parquet")
            ids, raw = table["sample_id"].to_pylist(), table["raw_text"].to_pylist()
            texts.update(zip(ids, raw, strict=True))
    first: dict[str, str] = {}
    answers = {}
    for path in sorted((run / "results" / "prompts").glob("*.parquet")):
        if ".frames" in path.name:
            continue
        for row in pq.read_table(path, columns=["sample_id", "request_key"]).to_pylist():
            owner = first.setdefault(row["request_key"], row["sample_id"])
            answers[row["sample_id"]] = texts[owner]
    assert all(isinstance(text, str) for text in answers.values())
    return answers


@pytest.fixture(scope="module")
def run(demo_workflow: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    workdir = copy_run(demo_workflow, tmp_path_factory.mktemp("integrations") / "run")
    answers = replay_answers(workdir)
    # One request that failed: an error row for the workflow, an exception from the mock.
    failed = sorted(sid for sid in answers if "instance_recognition" in sid)[0]
    answers[failed] = None
    lines = [
        json.dumps({"sample_id": sid, "request_status": "error" if text is None else "ok",
                    "raw_text": text})
        for sid, text in sorted(answers.items())
    ]  # fmt: skip
    (workdir / "inspect_replay.jsonl").write_text("\n".join(lines) + "\n")
    config_path = workdir / "config" / "config.yaml"
    config = yaml.safe_load(config_path.read_text())
    config["models"].append(
        {"name": REPLAY, "backend": "replay", "replay": ["inspect_replay.jsonl"]}
    )
    mlruns = workdir / "mlruns"
    config["mlflow"] = {"tracking_uri": mlruns.as_uri(), "experiment": "demo"}
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    targets = ["exports", "hf_dataset", "results/exports/mlflow_runs.json"]
    run_snakemake(workdir, *targets)
    return {"dir": workdir, "answers": answers, "mlruns": mlruns, "config": config}


def workflow_metrics(workdir: Path, model: str) -> dict[str, float]:
    table = pq.read_table(workdir / "results" / "metrics" / "by_model" / f"{model}.parquet")
    values = metric_values(table.filter(pc.equal(table["stratum"], "all")))
    return {k: v for k, v in values.items() if not math.isnan(v)}


# -- inspect_ai ------------------------------------------------------------------------------


def test_inspect_eval_gives_the_workflows_metrics(run: dict, tmp_path: Path) -> None:
    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import ModelOutput, ModelUsage, get_model

    from dualcog.integrations.inspect_task import uav_dualcog

    args = {"data_root": str(DEMO), "media_store": str(workflow_runner.shared_media_store)}
    by_request = {}
    for sample in uav_dualcog(**args).dataset:
        by_request.setdefault(request_of(sample.input), run["answers"][sample.id])

    sent = set()

    def answer(messages, tools, tool_choice, config):
        sent.add((config.temperature, config.max_tokens))
        text = by_request[request_of(messages)]
        if text is None:
            raise RuntimeError("the provider failed")
        output = ModelOutput.from_content(model="mockllm", content=text)
        output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
        return output

    # By its registered name, as `inspect eval dualcog/uav_dualcog` finds it.
    (log,) = inspect_eval(
        "dualcog/uav_dualcog",
        model=get_model("mockllm/model", custom_outputs=answer),
        task_args=args,
        log_dir=str(tmp_path),
        display="none",
    )
    assert log.status == "success", log.error
    assert sent == {(DEFAULT_TEMPERATURE, DEFAULT_MAX_TOKENS)}  # our request defaults
    # The failed request is scored as unanswered, as the workflow's error row is.
    (failed,) = [s for s in log.samples if next(iter(s.scores.values())).metadata["error_type"]]
    assert next(iter(failed.scores.values())).metadata["error_message"] == "the provider failed"
    assert run["answers"][failed.id] is None
    got = {m.name: m.value for score in log.results.scores for m in score.metrics.values()}
    want = workflow_metrics(run["dir"], REPLAY)
    assert got == want  # every value to the last bit
    # Every task in strict and compatible (and legacy for images), the dual metrics too.
    for kind in REQUEST_KINDS:
        for scored in kind.scored_as:
            modes = ("strict", "compatible") + (("legacy",) if kind.modality == "image" else ())
            for mode in modes:
                assert f"{mode}/{scored}/response_rate" in got
    assert any(key.startswith("compatible/position/") for key in got)
    assert got["strict/composite_behavior/response_rate"] == 15 / 16  # the failed request
    # The permille answers only make sense at the run-level scale: compatible beats strict.
    assert (
        got["compatible/landmark_position/bbox_acc50"] > got["strict/landmark_position/bbox_acc50"]
    )
    # Per-sample outcomes in the log (what `inspect view` shows).
    samples = log.samples
    assert len(samples) == sum(Counter(ingest(DEMO)[0]["task"].to_pylist()).values())
    image = next(s for s in samples if s.metadata["task"] == "landmark_position")
    score = next(iter(image.scores.values()))
    assert set(score.value) >= {"option_correct", "bbox_hit", "iou", "joint_correct"}
    assert score.metadata["raw_text"] == run["answers"][image.id]
    assert score.explanation.startswith("compatible parse: stage ")


def test_inspect_metrics_cover_the_samples_run(run: dict, tmp_path: Path) -> None:
    """`--limit` / `--sample-id`: the metrics are those of the samples run, as a workflow run
    on those samples alone gives them."""
    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import ModelOutput, ModelUsage, get_model

    from dualcog.integrations.evaluation import Answer, score_answers
    from dualcog.schemas import SAMPLES, table_from_rows

    rows = ingest(DEMO, ["landmark_position"])[0].to_pylist()
    chosen = [rows[0]["sample_id"], rows[3]["sample_id"]]
    text = '{"answer_option_id": "A", "bbox_xyxy_norm": [100, 100, 500, 500]}'

    def answer(messages, tools, tool_choice, config):
        output = ModelOutput.from_content(model="mockllm", content=text)
        output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
        return output

    (log,) = inspect_eval(
        "dualcog/uav_dualcog",
        model=get_model("mockllm/model", custom_outputs=answer),
        task_args={"data_root": str(DEMO), "tasks": "landmark_position",
                   "media_store": str(workflow_runner.shared_media_store)},
        sample_id=chosen,
        log_dir=str(tmp_path),
        display="none",
    )  # fmt: skip
    got = {m.name: m.value for score in log.results.scores for m in score.metrics.values()}
    subset = table_from_rows([r for r in rows if r["sample_id"] in chosen], SAMPLES)
    want = score_answers("x", subset, {sid: Answer(text) for sid in chosen}).metrics
    want = want.filter(pc.equal(want["stratum"], "all"))
    assert got == {k: v for k, v in metric_values(want).items() if not math.isnan(v)}
    assert got["compatible/landmark_position/response_rate"] == 1.0


def test_inspect_frames_mode_sends_the_workflows_prompts(run: dict) -> None:
    from dualcog.integrations.inspect_task import uav_dualcog

    task = uav_dualcog(
        data_root=str(DEMO),
        tasks="landmark_visibility",
        video_mode="frames",
        video_frames=4,
        media_store=str(workflow_runner.shared_media_store),
    )
    prompts = pq.read_table(run["dir"] / "results/prompts/landmark_visibility.frames4.parquet")
    want = {row["sample_id"]: (row["user_text"], row["media_kinds"]) for row in prompts.to_pylist()}
    got = {}
    for sample in task.dataset:
        user = sample.input[-1]
        # the 4 frames, then the reference image: all sent as images
        got[sample.id] = (user.content[0].text, ["frames"] * 4 + ["image"])
        assert [block.type for block in user.content[1:]] == ["image"] * 5
    assert got == want


def test_inspect_task_arguments_are_checked() -> None:
    from dualcog.errors import ConfigError
    from dualcog.integrations.inspect_task import task_list, uav_dualcog

    assert task_list("behavior, landmark_position") == ["landmark_position", "behavior"]
    with pytest.raises(ConfigError, match="unknown tasks \\['nope'\\]"):
        task_list("behavior,nope")
    with pytest.raises(ConfigError, match="parse='lenient'"):
        uav_dualcog(data_root=str(DEMO), parse="lenient")
    with pytest.raises(ConfigError, match="mode suffix -Thinking but no `family`"):
        uav_dualcog(data_root=str(DEMO), mode="Thinking")
    with pytest.raises(ConfigError, match="mode='Fast'"):
        uav_dualcog(data_root=str(DEMO), mode="Fast", family="qwen_vllm")


def test_inspect_task_sends_the_familys_mode_switch() -> None:
    from dualcog.integrations.inspect_task import uav_dualcog

    task = uav_dualcog(
        data_root=str(DEMO),
        tasks="landmark_position",
        family="qwen_vllm",
        mode="Instant",
        extra_body={"top_k": 20},
        temperature=0.5,
        media_store=str(workflow_runner.shared_media_store),
    )
    assert task.config.extra_body == {
        "chat_template_kwargs": {"enable_thinking": False},
        "top_k": 20,
    }
    assert (task.config.temperature, task.config.max_tokens, task.config.timeout) == (
        0.5,
        2048,
        600,
    )
    assert len(task.dataset) == 16


# -- exports ---------------------------------------------------------------------------------


def test_every_eval_ever_files_validate(run: dict) -> None:
    root = run["dir"] / "results" / "exports" / "every_eval_ever"
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.json*"))
    models = [m["name"] for m in run["config"]["models"]]
    assert len(files) == 2 * len(models)
    env = {**os.environ, "PYTHONPATH": str(EEE_TARGET)}
    done = subprocess.run(
        [sys.executable, str(Path(__file__).parents[1] / "eee_validate.py"), str(root), *files],
        capture_output=True, text=True, env=env, check=True,
    )  # fmt: skip
    reports = json.loads(done.stdout)
    for name, (valid, errors, warnings, schema_errors) in reports.items():
        assert (valid, errors, schema_errors) == (True, [], []), name
        # A replayed run names no developer: EEE files it under `unknown` and says so.
        if "/unknown/" in name and name.endswith(".json"):
            assert [w["loc"] for w in warnings] == ["model_info"], warnings
            assert "unknown" in warnings[0]["msg"]
        else:
            assert warnings == [], name
    # The stamp rides in each record; the scores are the run's compatible headline cells.
    stamp = read_stamp(run["dir"] / "results" / "stamp.json")
    folder = root / "data" / "uav-dualcog" / "unknown" / REPLAY
    (aggregate_path,) = folder.glob("*[0-9a-f].json")
    aggregate = json.loads(aggregate_path.read_text())
    details = aggregate["source_metadata"]["additional_details"]
    assert details["dualcog_stamp_digest"] == stamp_digest(stamp)
    assert details["protocol_revision"] == stamp["protocol_revision"]
    assert details["settings_digest"] == stamp["models"][REPLAY]["digest"]
    want = workflow_metrics(run["dir"], REPLAY)
    for result in aggregate["evaluation_results"]:
        task, metric = result["evaluation_result_id"].split(".")
        assert result["score_details"]["score"] == want[f"compatible/{task}/{metric}"]
    lines = [json.loads(line) for line in folder.glob("*_samples.jsonl").__next__().open()]
    # one row per sample and scored task: behavior samples count at two levels
    counts = Counter(ingest(DEMO)[0]["task"].to_pylist())
    assert len(lines) == sum(counts.values()) + counts["behavior"]
    assert aggregate["detailed_evaluation_results"]["total_rows"] == len(lines)
    assert {line["metadata"]["dualcog_stamp_digest"] for line in lines} == {stamp_digest(stamp)}


def test_hub_eval_results_per_model(run: dict) -> None:
    from huggingface_hub import parse_eval_result_entries

    stamp = read_stamp(run["dir"] / "results" / "stamp.json")
    folder = run["dir"] / "results" / "exports" / "eval_results"
    assert sorted(p.stem for p in folder.glob("*.yaml")) == sorted(
        m["name"] for m in run["config"]["models"]
    )
    entries = parse_eval_result_entries(yaml.safe_load((folder / "oracle.yaml").read_text()))
    assert entries and {e.dataset_id for e in entries} == {"Lozumi/UAV-DualCog"}
    want = workflow_metrics(run["dir"], "oracle")
    for entry in entries:
        task, metric = entry.task_id.split(".")
        assert entry.value == want[f"compatible/{task}/{metric}"]
        assert f"dualcog_stamp_digest {stamp_digest(stamp)}" in entry.notes
    assert "landmark_position.option_acc" in {e.task_id for e in entries}
    assert len(entries) == len([k for k in want if k.startswith("compatible/")])


# -- datasets --------------------------------------------------------------------------------


def test_dataset_folder_loads_with_datasets(run: dict, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import datasets

    folder = run["dir"] / "results" / "exports" / "dataset"
    loaded = datasets.load_dataset(str(folder), cache_dir=str(tmp_path / "cache"))
    counts = Counter(ingest(DEMO)[0]["task"].to_pylist())
    assert {name: split.num_rows for name, split in loaded.items()} == dict(counts)
    row = loaded["landmark_position"][0]
    for item in row["media"]:
        assert (DEMO / item["path"]).is_file() and item["bytes"] is None
    assert (DEMO / row["manifest_path"]).is_file()
    card = yaml.safe_load((folder / "README.md").read_text().split("---")[1])
    stamp = read_stamp(run["dir"] / "results" / "stamp.json")
    assert card["source"]["manifests_digest"] == stamp["data"]["digest"]


def test_dataset_media_embedded_when_asked(tmp_path: Path) -> None:
    from dualcog.integrations.hf_dataset import dataset_table
    from dualcog.schemas import SAMPLES, table_from_rows

    rows = ingest(DEMO, ["landmark_position"])[0].to_pylist()
    table = dataset_table(table_from_rows(rows[:2], SAMPLES), DEMO, embed_media=True)
    for item, source in zip(table["media"][0].as_py(), rows[0]["media"], strict=True):
        assert item["bytes"] == Path(source["resolved_path"]).read_bytes()


def test_dataset_refuses_media_outside_the_root_and_bad_split_names(tmp_path: Path) -> None:
    from dualcog.errors import DataError
    from dualcog.integrations.hf_dataset import dataset_card, dataset_table
    from dualcog.schemas import SAMPLES, table_from_rows

    rows = ingest(DEMO, ["landmark_position"])[0].to_pylist()
    with pytest.raises(DataError, match="outside the data root"):
        dataset_table(table_from_rows(rows[:1], SAMPLES), tmp_path, embed_media=False)
    with pytest.raises(DataError, match="not a valid split name"):
        dataset_card({"test-split": 1}, {}, False)


# -- MLflow ----------------------------------------------------------------------------------


def test_mlflow_file_store_holds_the_runs_metrics(run: dict) -> None:
    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    import mlflow

    record = json.loads((run["dir"] / "results/exports/mlflow_runs.json").read_text())
    client = mlflow.MlflowClient(tracking_uri=run["mlruns"].as_uri())
    assert sorted(record["runs"]) == sorted(m["name"] for m in run["config"]["models"])
    stamp = read_stamp(run["dir"] / "results" / "stamp.json")
    for model, run_id in record["runs"].items():
        logged = client.get_run(run_id)
        table = pq.read_table(run["dir"] / "results/metrics/by_model" / f"{model}.parquet")
        want = {k: v for k, v in metric_values(table).items() if not math.isnan(v)}
        assert logged.data.metrics == want
        assert logged.data.tags["dualcog.dualcog_stamp_digest"] == stamp_digest(stamp)
        artifacts = {a.path for a in client.list_artifacts(run_id)}
        assert {"stamp.json", "tables"} <= artifacts
    (experiment,) = [e for e in client.search_experiments() if e.name == "demo"]
    assert experiment.experiment_id == logged.info.experiment_id


# -- the default run needs none of it --------------------------------------------------------


def test_default_target_leaves_the_integrations_out(demo_workflow: Path) -> None:
    done = run_snakemake(demo_workflow, "-n", "--forceall", "--nolock")
    rules = done.stdout + done.stderr
    assert "collect_metrics" in rules
    for name in ("exports", "hf_dataset", "mlflow_log"):
        assert name not in rules.split()
    # Only the integration modules import the extra's packages.
    for path in (REPO / "src" / "dualcog").rglob("*.py"):
        if "integrations" in path.parts:
            continue
        text = path.read_text()
        for package in ("inspect_ai", "datasets", "mlflow"):
            assert f"import {package}" not in text and f"from {package}" not in text, path
    for path in (REPO / "scripts").glob("*.py"):
        if path.stem in ("exports", "hf_dataset", "mlflow_log"):
            continue
        assert "dualcog.integrations" not in path.read_text(), path


def test_stamp_details_carry_request_digests() -> None:
    from dualcog.integrations.exports import stamp_details

    stamp = {
        "version": "0.1.0",
        "git": {"commit": "a" * 40, "dirty": False},
        "protocol_revision": "2.3",
        "stage_versions": {},
        "models": {"m": {"digest": "d1", "request_set": {"requests": 7, "digest": "r1"}}},
        "data": {"digest": "dd"},
        "release": {"commit": "c" * 40},
        "created": "2026-01-01T00:00:00Z",
    }
    details = stamp_details(stamp, "m")
    assert details["git_commit"] == "a" * 12
    assert details["data_revision"] == "c" * 40
    assert details["settings_digest"] == "d1"
    assert (details["request_set_digest"], details["requests_posted"]) == ("r1", "7")
    assert stamp_details({**stamp, "models": {"m": {"digest": "d1"}}}, "m")[
        "request_set_digest"
    ] == ("none (no request posted)")
    assert details["dualcog_stamp_digest"] == stamp_digest(stamp)
    assert all(isinstance(v, str) for v in details.values())


def test_eee_uuid_is_version_4_and_fixed_by_stamp_and_model() -> None:
    import uuid

    from dualcog.integrations.exports import evaluation_uuid

    stamp = {"models": {}, "created": "x"}
    first = evaluation_uuid(stamp, "a")
    assert first == evaluation_uuid(stamp, "a") != evaluation_uuid(stamp, "b")
    assert uuid.UUID(first).version == 4
