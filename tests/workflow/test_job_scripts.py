"""The per-model job scripts (Arrow in and out) write the files the library's pandas paths
write.

The jobs run here as Snakemake runs them: the script file executed with a `snakemake` object
in its globals, in a fresh interpreter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from test_inference_offline import build_prompts, build_samples

from dualcog import schemas
from dualcog.inference import run_model, run_model_table, run_per_model, run_per_model_tables

REPO = Path(__file__).resolve().parents[2]

# Runs each script listed in argv[1]'s JSON as its job would, one after the other.
RUN_JOBS = """
import json, runpy, sys
from types import SimpleNamespace


class Files(list):
    def __init__(self, items, **named):
        super().__init__(items)
        self.__dict__.update(named)


for job in json.loads(open(sys.argv[1]).read()):
    sm = SimpleNamespace(
        config=job["config"],
        wildcards=SimpleNamespace(**job["wildcards"]),
        input=Files(list(job["input"].values()), **job["input"]),
        output=Files(list(job["output"].values()) if isinstance(job["output"], dict)
                     else job["output"], **(job["output"] if isinstance(job["output"], dict)
                                            else {})),
        params=SimpleNamespace(**job["params"]),
        log=[job["log"]],
        rule=job["script"],
    )
    runpy.run_path(job["script"], init_globals={"snakemake": sm}, run_name="__main__")
"""


def run_jobs(tmp_path: Path, jobs: list[dict]) -> None:
    """Run `jobs` (scripts with their Snakemake-like inputs) in one fresh interpreter."""
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    result = subprocess.run(
        [sys.executable, "-c", RUN_JOBS, str(tmp_path / "jobs.json")],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]


def _outputs(jobs: list[dict]) -> dict[str, bytes]:
    """Every file the jobs wrote (but their logs), by path."""
    paths = [
        path
        for job in jobs
        for path in (job["output"].values() if isinstance(job["output"], dict) else job["output"])
    ]
    return {path: Path(path).read_bytes() for path in paths}


def _model_responses(
    model: dict, prompts: pd.DataFrame, samples: pd.DataFrame, tmp: Path
) -> tuple[bytes, bytes]:
    """The RESPONSES file written from `run_model` (frames) and `run_model_table` (Arrow)."""
    frame = run_model(model, prompts, samples, tmp, tmp)
    table = run_model_table(
        model, pa.Table.from_pandas(prompts), pa.Table.from_pandas(samples), tmp, tmp
    )
    schemas.write_table(frame, schemas.RESPONSES, tmp / "frame.parquet")
    schemas.write_table(table, schemas.RESPONSES, tmp / "table.parquet")
    return (tmp / "frame.parquet").read_bytes(), (tmp / "table.parquet").read_bytes()


@pytest.mark.parametrize(
    "model",
    [
        {"name": "o", "backend": "oracle"},
        {"name": "r", "backend": "random", "seed": 4},
        {"name": "s", "backend": "simulated", "seed": 9, "quirks": ["fence", "think", "garbage"]},
        {"name": "p", "backend": "simulated", "quirks": ["pixel640x480", "alias_keys"]},
    ],
    ids=lambda model: model["name"],
)
def test_arrow_run_writes_the_bytes_the_frame_run_writes(model: dict, tmp_path: Path) -> None:
    samples = build_samples()
    by_frame, by_table = _model_responses(model, build_prompts(samples), samples, tmp_path)
    assert by_frame == by_table


def test_replay_tables_equal_replay_frames(tmp_path: Path) -> None:
    samples = build_samples()
    prompts = build_prompts(samples)
    replay = tmp_path / "replay.jsonl"
    lines = [
        {"sample_id": sid, "raw_text": f"answer {i}", "status": "ok", "latency_ms": 10.5 * i}
        for i, sid in enumerate(prompts["sample_id"])
        if i % 3
    ]
    replay.write_text("".join(json.dumps(line) + "\n" for line in lines))
    model = {"name": "rec", "backend": "replay", "replay": str(replay)}
    by_task = {task: group.reset_index(drop=True) for task, group in prompts.groupby("task")}
    frames = run_per_model(model, by_task)
    tables = run_per_model_tables(
        model, {task: pa.Table.from_pandas(frame) for task, frame in by_task.items()}
    )
    assert list(tables) == list(frames)
    for task, frame in frames.items():
        assert (
            schemas.to_table(frame, schemas.RESPONSES).cast(schemas.RESPONSES).equals(tables[task])
        ), task
    statuses = [s for table in tables.values() for s in table["status"].to_pylist()]
    assert statuses.count("missing") == len(prompts) - len(lines)


def test_a_misfit_response_value_names_its_column() -> None:
    from dualcog.inference.rows import responses_table

    row = {"sample_id": "s1", "task": "behavior", "status": "ok", "attempts": "two"}
    with pytest.raises(ValueError, match=r"responses: column 'attempts', row 0: "):
        responses_table([row])


def _write(table: pa.Table, schema: pa.Schema, path: Path) -> str:
    schemas.write_table(table, schema, path)
    return str(path)


def test_infer_and_score_jobs_answer_and_score_every_prompt(tmp_path: Path) -> None:
    samples = build_samples()
    prompts = build_prompts(samples)
    samples_path = _write(pa.Table.from_pandas(samples), schemas.SAMPLES, tmp_path / "s.parquet")
    tasks = ["self_position", "behavior"]
    prompt_paths = {}
    for task in tasks:
        rows = prompts[prompts["task"] == task].reset_index(drop=True)
        prompt_paths[task] = _write(
            pa.Table.from_pandas(rows), schemas.PROMPTS, tmp_path / f"{task}.prompts.parquet"
        )
    replay = tmp_path / "recorded.jsonl"
    replay.write_text(json.dumps({"sample_id": "vid_behavior_0", "raw_text": "{}"}) + "\n")
    sim = {"name": "sim", "backend": "simulated", "seed": 1, "quirks": ["fence", "per_mille"]}
    rec = {"name": "rec", "backend": "replay", "replay": str(replay)}
    config = {"models": [sim, rec]}
    out = tmp_path / "out"
    jobs = [
        {
            "script": str(REPO / "scripts/infer.py"),
            "config": config,
            "wildcards": {"model": "sim", "task": task},
            "input": {"prompts": prompt_paths[task], "samples": samples_path},
            "output": [str(out / f"sim.{task}.parquet")],
            "params": {"media_store": str(tmp_path / "media"), "cache_dir": str(tmp_path / "c")},
            "log": str(out / f"infer.{task}.log"),
        }
        for task in tasks
    ]
    bootstrap = {"replicates": 50, "seed": 3, "level": 0.95}
    pairs, weights = str(tmp_path / "pairs.parquet"), str(tmp_path / "weights.parquet")
    jobs += [
        {
            "script": str(REPO / f"scripts/{name}.py"),
            "config": config,
            "wildcards": {},
            "input": {"samples": samples_path},
            "output": [path],
            "params": {"version": "v", "bootstrap": bootstrap},
            "log": str(out / f"{name}.log"),
        }
        for name, path in (("pairs", pairs), ("bootstrap_weights", weights))
    ]

    def scored(prefix):
        return {
            "parsed": str(out / f"{prefix}.parsed.parquet"),
            "run": str(out / f"{prefix}.run.json"),
            **{
                name: str(out / f"{prefix}.{name}.parquet")
                for name in ("outcomes", "facts", "scores", "metrics", "intervals")
            },
        }

    scoring = {"bootstrap": bootstrap, "bbox_scale": None}
    scoring_inputs = {"samples": samples_path, "pairs": pairs, "weights": weights}
    # A replayed run and the simulated run again, each answered and scored in one job (the
    # rule for runs answered one job per run).
    for run, prefix in (("rec", "rec"), ("sim", "sim-run")):
        jobs.append(
            {
                "script": str(REPO / "scripts/infer_run.py"),
                "config": config,
                "wildcards": {"model": run},
                "input": {"prompts": [prompt_paths[task] for task in tasks], **scoring_inputs},
                "output": {
                    "responses": [str(out / f"{prefix}.{task}.parquet") for task in tasks],
                    **scored(prefix),
                },
                "params": {"tasks": tasks, "settings": {}, **scoring},
                "log": str(out / f"{prefix}.log"),
            }
        )
    # The simulated run's per-task responses scored by the `score` job.
    jobs.append(
        {
            "script": str(REPO / "scripts/score.py"),
            "config": config,
            "wildcards": {"model": "sim"},
            "input": {
                "responses": [str(out / f"sim.{task}.parquet") for task in tasks],
                **scoring_inputs,
            },
            "output": scored("sim"),
            "params": scoring,
            "log": str(out / "score.log"),
        }
    )
    run_jobs(tmp_path, jobs)

    # The jobs did their work: every prompt answered, the replayed one found, all parsed.
    for task in tasks:
        written = pd.read_parquet(out / f"sim.{task}.parquet")
        assert written["sample_id"].tolist() == prompts[prompts.task == task].sample_id.tolist()
        assert set(written["status"]) == {"ok"}
        run_job = out / f"sim-run.{task}.parquet"
        assert run_job.read_bytes() == (out / f"sim.{task}.parquet").read_bytes()
    replayed = pd.concat(pd.read_parquet(out / f"rec.{task}.parquet") for task in tasks)
    assert replayed.set_index("sample_id")["status"].to_dict()["vid_behavior_0"] == "ok"
    assert (replayed["status"] == "ok").sum() == 1
    parsed = pd.read_parquet(out / "sim.parsed.parquet")
    assert len(parsed) == 3 * 2 + 2 * 2  # two image samples, two behavior samples
    assert json.loads((out / "sim.run.json").read_text())["scale"] == "per_mille"
    outcomes = pd.read_parquet(out / "sim.outcomes.parquet")
    assert len(outcomes) == 2 + 2 and set(outcomes["outcome"]) <= {"answered", "unparsable"}
    facts = pd.read_parquet(out / "sim.facts.parquet")
    assert len(facts) == 2 + 2 and not facts["empty"].any() and set(facts["status"]) == {"ok"}
    metrics = pd.read_parquet(out / "sim.metrics.parquet")
    assert {"self_position", "atomic_behavior"} <= set(metrics["task"])
    assert metrics["value"].notna().any()
    intervals = pd.read_parquet(out / "sim.intervals.parquet")
    assert len(intervals) == len(metrics)
    # A run scored by the job that answered it, and by the `score` job: the same files.
    for name in ("parsed", "outcomes", "facts", "scores", "metrics", "intervals"):
        ours = out / f"sim-run.{name}.parquet"
        assert ours.read_bytes() == (out / f"sim.{name}.parquet").read_bytes(), name
    assert json.loads((out / "rec.run.json").read_text())["stage_counts"]


def test_ingest_job_writes_what_ingest_writes(tmp_path: Path) -> None:
    from dataset_builder import write_dataset

    from dualcog.ingest import ingest

    data = write_dataset(tmp_path / "data")
    out = tmp_path / "out"
    job = {
        "script": str(REPO / "scripts/ingest.py"),
        "config": {},
        "wildcards": {},
        "input": {},
        "output": [str(out / "samples.parquet"), str(out / "excluded.json")],
        "params": {
            "data_root": str(data),
            "tasks": None,
            "exclude_samples": ["nowhere"],
            "media_roots": [],
        },  # fmt: skip
        "log": str(out / "ingest.log"),
    }
    run_jobs(tmp_path, [job])
    expected = tmp_path / "frame.parquet"
    schemas.write_table(ingest(data), schemas.SAMPLES, expected)
    assert (out / "samples.parquet").read_bytes() == expected.read_bytes()
    assert json.loads((out / "excluded.json").read_text())["not_found"] == ["nowhere"]


def test_pairs_job_writes_what_dual_pairs_writes(tmp_path: Path) -> None:
    from dataset_builder import write_dataset
    from test_pairing import cases_of, random_samples, reference_dual_pairs

    from dualcog.ingest import ingest
    from dualcog.scoring import PAIRS, dual_pairs

    # The builder's dataset, and a random sample set with missing fields and repeats.
    seed = next(
        seed
        for seed in range(100)
        if {"pairs", "missing key", "several per slot", "repeated mission", "missing mission"}
        <= cases_of(random_samples(seed), dual_pairs(random_samples(seed))[0])
    )
    sets = {"built": ingest(write_dataset(tmp_path / "data")), "random": random_samples(seed)}
    out = tmp_path / "out"
    jobs = [
        {
            "script": str(REPO / "scripts/pairs.py"),
            "config": {},
            "wildcards": {},
            "input": {
                "samples": _write(
                    schemas.to_table(samples, schemas.SAMPLES),
                    schemas.SAMPLES,
                    tmp_path / f"{name}.samples.parquet",
                )
            },
            "output": [str(out / f"{name}.pairs.parquet")],
            "params": {"version": "v"},
            "log": str(out / f"{name}.pairs.log"),
        }  # fmt: skip
        for name, samples in sets.items()
    ]
    run_jobs(tmp_path, jobs)
    for name, job in zip(sets, jobs, strict=True):
        # What the pandas job logged and wrote, from the samples as it read them.
        frame = schemas.read_frame(job["input"]["samples"])
        pairs, unpaired = dual_pairs(frame)
        assert len(pairs) > 0
        assert name != "random" or unpaired["unpaired"].sum() > 0
        written = Path(job["output"][0]).read_bytes()
        for how, pairs_frame in (("dual_pairs", pairs), ("pandas", reference_dual_pairs(frame)[0])):
            expected = tmp_path / f"{name}.{how}.parquet"
            schemas.write_table(pairs_frame, PAIRS, expected)
            assert written == expected.read_bytes(), (name, how)
        logged = Path(job["log"]).read_text()
        assert f"pairs per family: {pairs.groupby('family').size().to_dict()}\n" in logged
        assert f"unpaired samples: {unpaired.to_dict('records')}\n" in logged


def test_render_jobs_write_what_render_prompts_writes(
    tmp_path: Path,
) -> None:
    from dataset_builder import write_dataset

    from dualcog.ingest import ingest
    from dualcog.media.store import ImageSettings, PreparedFrames, image_key, video_file_key
    from dualcog.prompts.render import image_sources, render_prompts, video_sources

    samples = ingest(write_dataset(tmp_path / "data"))
    samples_path = _write(
        schemas.to_table(samples, schemas.SAMPLES), schemas.SAMPLES, tmp_path / "s.parquet"
    )
    settings = {"max_width": 640, "max_height": 480, "jpeg_quality": 90}
    image_settings = ImageSettings(640, 480, 90)
    images = {s: image_key(s, image_settings) for s in image_sources(samples)}
    videos = {s: video_file_key(s) for s in video_sources(samples)}
    # A frames-mode job reads the sampled frames (rows as prepare_videos makes them, written as
    # its job writes them): their keys and timestamps, never the frames themselves.
    sampled = [
        {"source": s, "keys": [f"k{i}{j}" for j in range(3)], "timestamps": [0.0, 1.25, i + 2.5]}
        for i, s in enumerate(video_sources(samples))
    ]
    frames_path = tmp_path / "videos.frames3.parquet"
    pd.DataFrame(sampled, columns=["source", "keys", "timestamps"]).to_parquet(frames_path)
    tasks = {
        "landmark_position": {},
        "future_observation": {},
        "behavior": {"vmode": "video_url"},
        "landmark_visibility": {"vmode": "frames3"},
    }
    assert set(tasks) <= set(samples["task"])  # every kind of media is rendered
    out = tmp_path / "out"
    jobs = [
        {
            "script": str(REPO / "scripts/render.py"),
            "config": {},
            "wildcards": {"task": task, **vmode},
            "input": {
                "samples": samples_path,
                **({"videos": str(frames_path)} if vmode.get("vmode") == "frames3" else {}),
            },
            "output": [str(out / f"{task}.parquet")],
            "params": {"settings": settings},
            "log": str(out / f"render.{task}.log"),
        }
        for task, vmode in tasks.items()
    ]
    run_jobs(tmp_path, jobs)
    frames = {
        row["source"]: PreparedFrames(row["source"], list(row["keys"]), list(row["timestamps"]))
        for row in sampled
    }
    for task, vmode in tasks.items():
        mode = vmode.get("vmode")
        expected = render_prompts(
            samples,
            task,
            images,
            videos if mode == "video_url" else None,
            frames if mode == "frames3" else None,
        )
        assert len(expected) > 0
        schemas.write_table(expected, schemas.PROMPTS, tmp_path / f"{task}.frame.parquet")
        written = (out / f"{task}.parquet").read_bytes()
        assert written == (tmp_path / f"{task}.frame.parquet").read_bytes(), task


def test_blank_texts_trims_the_whitespace_arrow_trims() -> None:
    """`blank_texts` judges string columns in Python: Python's whitespace must be Arrow's."""
    import pyarrow.compute as pc

    from dualcog.outcomes import blank_texts

    points = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    arrow_blank = pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(pa.array(points))), 0)
    assert [not p.strip() for p in points] == arrow_blank.to_pylist()
    texts = pa.chunked_array([[None, "", " \t\n", "\u3000x\u2028", "\x1c\x85\xa0"], [" a "]])
    assert blank_texts(texts).tolist() == [True, True, True, False, True, False]
    assert blank_texts(pa.nulls(2)).tolist() == [True, True]  # not a string column: Arrow's way


def _score_world() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Image pairs of both families' position sides over two scenes and two difficulties, a
    behavior and a visibility sample per mission; boxes of varied overlap (the mIoU sums are
    not round), wrong and missing answers, strict and compatible parses."""
    from score_fixtures import (
        behavior_parsed,
        behavior_sample,
        image_parsed,
        image_sample,
        missing_parsed,
        parsed_frame,
        samples_frame,
        visibility_parsed,
        visibility_sample,
    )

    samples, parsed = [], []
    for k in range(12):
        for task in ("landmark_position", "self_position"):
            sid = f"{task[:4]}{k}"
            samples.append(image_sample(
                sid, task=task, difficulty=("4way", "8way", None)[k % 3],
                scene_id=f"s{k % 2}", landmark_id=f"lm{k % 5}", context_index=2 * k + 1,
            ))  # fmt: skip
            box = (0.2, 0.2, 0.41 + 0.037 * k, 0.6 + 0.011 * (k % 4))
            for parse in ("strict", "compatible"):
                if k == 5 and parse == "strict":
                    parsed.append(missing_parsed(sid, task, parse))
                    continue
                option = ["A"] if (k + len(task) + len(parse)) % 4 else ["B"]
                parsed.append(image_parsed(sid, parse, option, box, task=task))
    levels = {"A": "atomic", "B": "atomic", "E": "composite"}
    for k in range(5):
        gold = [("A", "atomic", [[0.0, 10.0 + k]]), ("E", "composite", [[0.0, 30.0]])]
        samples.append(behavior_sample(f"b{k}", levels, gold, k % 2 == 0, mission_id=f"m{k}"))
        samples.append(visibility_sample(f"v{k}", 1 + k % 2, [[3.0, 17.5 + k]],
                                         mission_id=f"m{k}"))  # fmt: skip
        for parse in ("strict", "compatible"):
            answers = [("A", [[0.5, 9.0 + 1.3 * k]]), ("E", [[1.0, 29.0]])][: 1 + k % 2]
            parsed.append(behavior_parsed(f"b{k}", answers if k != 3 else None, parse))
            parsed.append(visibility_parsed(f"v{k}", 1 + (k * 7) % 3, [[2.9, 18.0 + 0.7 * k]],
                                            parse))  # fmt: skip
    return samples_frame(samples), parsed_frame(parsed)


def test_scoring_a_run_gives_the_library_results(tmp_path: Path) -> None:
    """A scored run's scores, metrics and intervals (`dualcog.evaluate.score_parsed`, under
    the weights the `bootstrap_weights` job draws) are what the pandas functions give."""
    from dualcog.scoring import PAIRS, SCORES, dual_pairs, model_metrics, score_samples
    from dualcog.stats import (
        CONFIDENCE_INTERVALS,
        BootstrapSettings,
        build_clusters,
        model_intervals,
    )

    samples, parsed = _score_world()
    pairs, _ = dual_pairs(samples)
    assert set(pairs["family"]) == {"position", "video"}
    inputs = {
        "samples": _write(schemas.to_table(samples, schemas.SAMPLES), schemas.SAMPLES,
                          tmp_path / "samples.parquet"),
        "pairs": _write(schemas.to_table(pairs, PAIRS), PAIRS, tmp_path / "pairs.parquet"),
        "parsed": _write(schemas.to_table(parsed, schemas.PARSED), schemas.PARSED,
                         tmp_path / "parsed.parquet"),
        "weights": str(tmp_path / "weights.parquet"),
    }  # fmt: skip
    bootstrap = {"replicates": 120, "seed": 7, "level": 0.9}
    weights_job = {
        "script": str(REPO / "scripts/bootstrap_weights.py"),
        "config": {},
        "wildcards": {},
        "input": {"samples": inputs["samples"]},
        "output": [inputs["weights"]],
        "params": {"version": "s", "bootstrap": bootstrap},
        "log": str(tmp_path / "bootstrap_weights.log"),
    }
    run_jobs(tmp_path, [weights_job])
    from dualcog.evaluate import score_parsed

    written = score_parsed(
        "m1",
        schemas.read_arrow(inputs["parsed"]),
        schemas.read_arrow(inputs["samples"]),
        schemas.read_arrow(inputs["pairs"]),
        schemas.read_arrow(inputs["weights"]),
        bootstrap,
    )
    out = dict(zip(("scores", "metrics", "intervals"), written, strict=True))

    scores = score_samples(samples, parsed)
    metrics = model_metrics("m1", samples, scores, pairs)
    settings = BootstrapSettings.from_config(bootstrap)
    intervals = model_intervals(
        "m1", samples, scores, metrics, build_clusters(samples), settings, pairs=pairs
    )
    assert len(metrics) > 100 and len(intervals) == len(metrics)
    assert {"dual_semantic_acc", "bbox_miou", "mean_tiou", "overall_score"} <= set(
        metrics["metric"]
    )
    assert intervals["ci_low"].notna().any() and (intervals["ci_low"] < intervals["ci_high"]).any()
    expected = {
        "scores": schemas.to_table(scores, SCORES),
        "metrics": schemas.to_table(metrics, schemas.METRICS),
        "intervals": schemas.to_table(intervals, CONFIDENCE_INTERVALS),
    }
    for name, table in expected.items():
        assert schemas.conformed(out[name], table.schema).equals(table), name
