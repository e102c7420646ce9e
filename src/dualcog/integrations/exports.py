"""A finished run's results in formats other tools read (docs/exports.md).

- the Hugging Face Hub's Eval Results YAML (`.eval_results/*.yaml` of a model repo), one file
  per model run;
- Every Eval Ever (EEE) records: an aggregate JSON and an instance-level JSONL per model run,
  in that datastore's layout `data/<benchmark>/<developer>/<model>/<uuid>[_samples].{json,jsonl}`.

Each carries the run's stamp: its digest, git commit, protocol revision, data digest and
release revision, the model's settings digest and the digest of the request bodies it posted
(each instance row: its own request's SHA-256). Values are fractions in [0, 1], as in
`metrics.parquet`: the compatible parse, stratum `all` (the paper's headline cells;
docs/protocol.md §9). Pure functions over rows: the `exports` rule reads and writes the files.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dualcog import atomic
from dualcog.backends import backend_of
from dualcog.stamp import short_commit, stamp_digest
from dualcog.tasks import REQUEST_BY_TASK, SCORED_BY_TASK

if TYPE_CHECKING:
    import pyarrow as pa

# huggingface_hub, yaml and pyarrow.parquet are imported by the functions that use them: the
# inspect task imports this module for `gold_text`, the mlflow job for `stamp_details`.

DEFAULT_DATASET = "Lozumi/UAV-DualCog"
BENCHMARK = "uav-dualcog"  # the EEE collection folder
EXPORT_PARSE = "compatible"
EEE_SCHEMA_VERSION = "0.3.0"  # the every-eval-ever schema these records follow

# The per-sample outcome behind each scored task's headline metric (instance-level rows):
# (metric, SCORES column giving the sample's score).
INSTANCE_METRIC = {
    "landmark_position": ("option_acc", "option_correct"),
    "future_observation": ("option_acc", "option_correct"),
    "self_position": ("option_acc", "option_correct"),
    "action_decision": ("option_acc", "option_correct"),
    "composite_behavior": ("composite_acc", "composite_set_correct"),
    "atomic_behavior": ("atomic_exact", "set_exact"),
    "landmark_visibility": ("count_acc", "count_correct"),
}


def stamp_details(stamp: Mapping[str, Any], model: str) -> dict[str, str]:
    """The stamp as string key-value pairs (what EEE's `additional_details` hold)."""
    entry = stamp.get("models", {}).get(model, {})
    release = stamp.get("release") or {}
    details = {
        "dualcog_stamp_digest": stamp_digest(stamp),
        "dualcog_version": str(stamp.get("version")),
        "git_commit": short_commit(stamp),
        "protocol_revision": str(stamp.get("protocol_revision")),
        "data_digest": str(stamp.get("data", {}).get("digest")),
        "data_revision": str(release.get("commit") or release.get("revision") or "unpinned"),
        "settings_digest": str(entry.get("digest")),
        "stage_versions": json.dumps(stamp.get("stage_versions", {}), sort_keys=True),
        "stamp_created": str(stamp.get("created")),
    }
    # The digest of the request bodies the run posted (dualcog.stamp.request_set_digest);
    # replayed and built-in runs post none.
    request_set = entry.get("request_set")
    if request_set:
        details["request_set_digest"] = str(request_set.get("digest"))
        details["requests_posted"] = str(request_set.get("requests"))
    else:
        details["request_set_digest"] = "none (no request posted)"
    return details


def stamp_note(stamp: Mapping[str, Any], model: str) -> str:
    """The stamp in one line (the Hub's `notes`)."""
    return "; ".join(f"{k} {v}" for k, v in stamp_details(stamp, model).items())


def headline_rows(metrics: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """METRICS rows of the exported cells: compatible parse, stratum `all`, finite values."""
    return [
        dict(row)
        for row in metrics
        if row["parse"] == EXPORT_PARSE
        and row["stratum"] == "all"
        and row["value"] is not None
        and math.isfinite(row["value"])
    ]


def result_id(task: str, metric: str) -> str:
    return f"{task}.{metric}"


def hub_eval_results(
    model: str,
    metrics: Iterable[Mapping[str, Any]],
    stamp: Mapping[str, Any],
    dataset_id: str = DEFAULT_DATASET,
) -> list[dict[str, Any]]:
    """One model run's `.eval_results/*.yaml` entries (huggingface_hub's own serializer)."""
    from huggingface_hub import EvalResultEntry, eval_result_entries_to_yaml

    release = stamp.get("release") or {}
    revision = release.get("commit") or release.get("revision")
    entries = [
        EvalResultEntry(
            dataset_id=dataset_id,
            task_id=result_id(row["task"], row["metric"]),
            value=float(row["value"]),
            dataset_revision=revision,
            date=stamp.get("created"),
            notes=f"dualcog {EXPORT_PARSE} parse, n={row['n']}; " + stamp_note(stamp, model),
        )
        for row in headline_rows(metrics)
    ]
    return eval_result_entries_to_yaml(entries)


def model_identity(model: Mapping[str, Any]) -> tuple[str, str]:
    """(EEE model id, developer): the request model when it names its developer
    (`org/name`), the project for its built-in backends, else `unknown`."""
    name = str(model["name"])
    request = str(model.get("request_model") or "")
    if "/" in request:
        return request, request.split("/", 1)[0]

    # Backends that make their answers from the gold (oracle, random, simulated): this project's.
    developer = "dualcog" if backend_of(model).reads_samples else "unknown"
    return f"{developer}/{name}", developer


def evaluation_uuid(stamp: Mapping[str, Any], model: str) -> str:
    """A UUID (version 4 layout, as EEE's file names require) fixed by the stamp and model:
    the same run exports to the same file names."""
    digest = hashlib.sha256(f"{stamp_digest(stamp)}/{model}".encode()).digest()[:16]
    return str(uuid.UUID(bytes=digest, version=4))


def eee_paths(model: Mapping[str, Any], stamp: Mapping[str, Any]) -> tuple[str, str]:
    """Repository-relative paths of the aggregate and instance files of one model run."""
    model_id, developer = model_identity(model)
    folder = "/".join(["data", BENCHMARK, developer, model_id.split("/", 1)[1].replace("/", "_")])
    name = evaluation_uuid(stamp, str(model["name"]))
    return f"{folder}/{name}.json", f"{folder}/{name}_samples.jsonl"


def _unix_time(created: str | None) -> str:

    if not created:
        return "0"
    moment = dt.datetime.strptime(created, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
    return str(int(moment.timestamp()))


def _metric_config(task: str, metric: str) -> dict[str, Any]:
    scored = SCORED_BY_TASK.get(task)
    label = scored.display_name if scored else task
    return {
        "evaluation_description": f"{label}: {metric} ({EXPORT_PARSE} parse, docs/protocol.md)",
        "metric_id": f"uav_dualcog.{metric}",
        "metric_name": metric,
        "metric_unit": "proportion",
        "lower_is_better": False,
        "score_type": "continuous",
        "min_score": 0.0,
        "max_score": 1.0,
    }


def eee_aggregate(
    model: Mapping[str, Any],
    metrics: Iterable[Mapping[str, Any]],
    stamp: Mapping[str, Any],
    instance_rows: int,
    instance_checksum: str,
    dataset_id: str = DEFAULT_DATASET,
) -> dict[str, Any]:
    """One model run's EEE aggregate record (every-eval-ever's eval.schema.json)."""
    name = str(model["name"])
    model_id, developer = model_identity(model)
    details = stamp_details(stamp, name)
    release = stamp.get("release") or {}
    _, samples_path = eee_paths(model, stamp)
    results = []
    for row in headline_rows(metrics):
        source: dict[str, Any] = {
            "dataset_name": "UAV-DualCog",
            "source_type": "hf_dataset",
            "hf_repo": dataset_id,
            "hf_split": row["task"],
            "samples_number": int(row["n"]),
        }
        if release.get("commit"):
            source["additional_details"] = {"revision": str(release["commit"])}
        results.append(
            {
                "evaluation_result_id": result_id(row["task"], row["metric"]),
                "evaluation_name": f"{row['task']}.{row['metric']}",
                "source_data": source,
                "evaluation_timestamp": str(stamp.get("created")),
                "metric_config": _metric_config(row["task"], row["metric"]),
                "score_details": {
                    "score": float(row["value"]),
                    "details": {"n": str(row["n"]), "parse": EXPORT_PARSE},
                },
            }
        )
    backend = str(model.get("backend"))
    return {
        "schema_version": EEE_SCHEMA_VERSION,
        "evaluation_id": f"{BENCHMARK}/{model_id}/{_unix_time(stamp.get('created'))}",
        "evaluation_timestamp": str(stamp.get("created")),
        "retrieved_timestamp": _unix_time(stamp.get("created")),
        "source_metadata": {
            "source_name": "dualcog (UAV-DualCog evaluation workflow)",
            "source_type": "evaluation_run",
            "source_organization_name": "dualcog",
            "evaluator_relationship": "third_party",
            "additional_details": details,
        },
        "eval_library": {
            "name": "dualcog",
            "version": str(stamp.get("version")),
            "additional_details": {"protocol_revision": details["protocol_revision"]},
        },
        "model_info": {
            "name": str(model.get("display_name") or name),
            "id": model_id,
            "developer": developer,
            "inference_platform": backend,
            "additional_details": {
                "run_name": name,
                "backend": backend,
                "deployment_type": "unknown",
                "model_availability": "unknown",
            },
        },
        "evaluation_results": results,
        "detailed_evaluation_results": {
            "format": "jsonl",
            "file_path": samples_path,
            "hash_algorithm": "sha256",
            "checksum": instance_checksum,
            "total_rows": instance_rows,
        },
    }


def gold_text(row: Mapping[str, Any]) -> str:
    """A sample's gold answer as JSON (the reference shown beside an answer)."""
    if REQUEST_BY_TASK[row["task"]].modality == "image":
        gold = {"option": row.get("gold_option_id"), "bbox": row.get("gold_bbox")}
    elif row["task"] == "behavior":
        gold = {"answers": row.get("gold_items")}
    else:
        gold = {
            "visible_count": row.get("gold_visible_count"),
            "visible_intervals": row.get("gold_visible_intervals"),
        }
    return json.dumps(gold, default=str, sort_keys=True)


def _sample_f1(row: Mapping[str, Any]) -> float:
    tp, fp, fn = (row.get(k) or 0 for k in ("label_tp", "label_fp", "label_fn"))
    return 1.0 if tp + fp + fn == 0 else 2 * tp / (2 * tp + fp + fn)


def eee_instances(
    model: Mapping[str, Any],
    scores: Iterable[Mapping[str, Any]],
    samples: Mapping[str, Mapping[str, Any]],
    responses: Mapping[str, Mapping[str, Any]],
    parsed: Mapping[str, Mapping[str, Any]],
    stamp: Mapping[str, Any],
) -> list[dict[str, Any]]:
    """EEE instance-level rows (instance_level_eval.schema.json): one per sample and scored
    task, in the compatible parse, joined to its task's headline result."""
    name = str(model["name"])
    model_id, _ = model_identity(model)
    aggregate_id = f"{BENCHMARK}/{model_id}/{_unix_time(stamp.get('created'))}"
    digest = stamp_digest(stamp)
    out = []
    for row in scores:
        if row["parse"] != EXPORT_PARSE:
            continue
        metric, column = INSTANCE_METRIC[row["task"]]
        sample = samples[row["sample_id"]]
        response = responses.get(row["sample_id"], {})
        text = response.get("raw_text")
        correct = bool(row.get(column))
        score = _sample_f1(row) if row["task"] == "atomic_behavior" else float(correct)
        raw_input = str(sample.get("user_prompt") or sample.get("prompt_vars") or "")
        reference = gold_text(sample)
        out.append(
            {
                "schema_version": EEE_SCHEMA_VERSION,
                "evaluation_id": aggregate_id,
                "model_id": model_id,
                "evaluation_name": result_id(row["task"], metric),
                "evaluation_result_id": result_id(row["task"], metric),
                "sample_id": row["sample_id"],
                "sample_hash": hashlib.sha256((raw_input + reference).encode()).hexdigest(),
                "interaction_type": "single_turn",
                "input": {"raw": raw_input, "reference": [reference]},
                "output": {"raw": [text] if isinstance(text, str) else []},
                "answer_attribution": [
                    {
                        "turn_idx": 0,
                        "source": "output.raw",
                        "extracted_value": json.dumps(
                            _extracted(parsed.get(row["sample_id"], {})), sort_keys=True
                        ),
                        "extraction_method": f"dualcog {EXPORT_PARSE} parse",
                        "is_terminal": True,
                    }
                ],
                "evaluation": {"score": score, "is_correct": correct},
                "error": response.get("error_type"),
                "metadata": {
                    **(
                        {"request_sha256": str(response["request_sha256"])}
                        if response.get("request_sha256")
                        else {}
                    ),
                    "run_name": name,
                    "task": row["task"],
                    "difficulty": str(row.get("difficulty")),
                    "responded": str(bool(row.get("responded"))),
                    "dualcog_stamp_digest": digest,
                },
            }
        )
    return out


_PARSED_ANSWER = ("stage", "option_ids", "bbox", "answers", "visible_count", "visible_intervals")


def _extracted(parsed: Mapping[str, Any]) -> dict[str, Any]:
    """What the compatible parse read from the answer (PARSED row: stage and fields)."""
    return {k: parsed.get(k) for k in _PARSED_ANSWER if parsed.get(k) is not None}


def jsonl_text(rows: Sequence[Mapping[str, Any]]) -> str:
    return "".join(json.dumps(row, sort_keys=True, allow_nan=False) + "\n" for row in rows)


__all__ = [
    "eee_aggregate",
    "eee_instances",
    "eee_paths",
    "export_run",
    "gold_text",
    "hub_eval_results",
    "jsonl_text",
    "stamp_details",
]


def export_run(
    folder: str | Path,
    models: Sequence[Mapping[str, Any]],
    stamp: Mapping[str, Any],
    samples: pa.Table,
    run_files: Mapping[str, Mapping[str, Any]],
    dataset_id: str = DEFAULT_DATASET,
) -> None:
    """Every export of a finished run under `folder`: `eval_results/<model>.yaml` and
    `every_eval_ever/data/...`. `run_files[model]`: its `metrics`, `scores` and `parsed`
    Parquet paths and its `responses` Parquet paths (the workflow's artifacts)."""
    import pyarrow.parquet as pq
    import yaml

    folder = Path(folder)
    by_id = {row["sample_id"]: row for row in samples.to_pylist()}
    for model in models:
        name = str(model["name"])
        files = run_files[name]
        metrics = pq.read_table(files["metrics"]).to_pylist()
        entries = hub_eval_results(name, metrics, stamp, dataset_id)
        atomic.write_text(
            folder / "eval_results" / f"{name}.yaml", yaml.safe_dump(entries, sort_keys=False)
        )
        responses = {}
        for path in files["responses"]:
            for row in pq.read_table(path).to_pylist():
                responses[row["sample_id"]] = row
        parsed = {
            row["sample_id"]: row
            for row in pq.read_table(files["parsed"]).to_pylist()
            if row["parse"] == EXPORT_PARSE
        }
        scores = pq.read_table(files["scores"]).to_pylist()
        instances = jsonl_text(eee_instances(model, scores, by_id, responses, parsed, stamp))
        checksum = hashlib.sha256(instances.encode()).hexdigest()
        aggregate = eee_aggregate(
            model, metrics, stamp, instances.count("\n"), checksum, dataset_id
        )
        aggregate_path, samples_path = eee_paths(model, stamp)
        root = folder / "every_eval_ever"
        atomic.write_text(root / samples_path, instances)
        atomic.write_text(
            root / aggregate_path, json.dumps(aggregate, indent=2, allow_nan=False) + "\n"
        )
