"""UAV-DualCog as an inspect_ai task: `inspect eval dualcog/uav_dualcog --model <provider/model>`.

Samples come from our ingest, prompts from our renderer, media from our preparation (the
same content-addressed store the workflow fills), request settings from our model-config
defaults (temperature, max_tokens, the mode switch's extra_body); the answer goes through
inspect's own model providers. Scoring is ours:

- each sample's Score shows its parse (stage, validity) and per-sample outcomes in the chosen
  parse mode, with the raw answer kept in its metadata;
- the task's metrics are the workflow's METRICS rows (stratum `all`: every task, the dual
  metrics over the matched-context pairs and the convenience aggregates) in every parse mode,
  computed over the whole run at once, so that `compatible` uses the run-level box scale
  (docs/protocol.md §3.3) exactly as the workflow does;
- a request that still fails after the provider's retries is scored as unanswered (the
  workflow's error row), so every sample run is scored and the metrics' population is
  exactly the samples run.

A sample's own Score in `compatible` mode resolves the box scale from that sample alone (a
scorer sees one sample); the metrics never do. Requires the `integrations` extra.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    ContentImage,
    ContentText,
    ContentVideo,
    GenerateConfig,
)
from inspect_ai.scorer import Metric, SampleScore, Score, Scorer, Target, metric, scorer
from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.util import LimitExceededError

from dualcog.errors import ConfigError
from dualcog.inference.engine import DEFAULT_CONCURRENCY, DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT_S
from dualcog.inference.media import media_path
from dualcog.inference.request import build_messages, request_settings
from dualcog.ingest import ingest
from dualcog.integrations.evaluation import Answer, metric_values, score_answers
from dualcog.integrations.exports import gold_text
from dualcog.media.store import (
    ImageSettings,
    PreparedFrames,
    image_key,
    prepare_images,
    prepare_videos,
)
from dualcog.prompts.render import image_sources, render_prompt_rows, video_sources
from dualcog.tasks import PARSE_MODES, REQUEST_BY_TASK, REQUEST_KINDS

MODEL_LABEL = "inspect"  # the run's name in the METRICS rows computed here
VIDEO_MODES = ("video_url", "frames")
MODES = ("Instant", "Thinking", "Reasoning")  # the run-name suffixes (dualcog.routes)


def task_list(tasks: str | Sequence[str] | None) -> list[str]:
    """`-T tasks=a,b` or a list; every request kind when not given (registry order)."""
    if tasks is None:
        return [kind.task for kind in REQUEST_KINDS]
    names = [t.strip() for t in tasks.split(",")] if isinstance(tasks, str) else list(tasks)
    unknown = [t for t in names if t not in REQUEST_BY_TASK]
    if unknown or not names:
        raise ConfigError(
            f"uav_dualcog: unknown tasks {unknown or names} (one of {list(REQUEST_BY_TASK)})"
        )
    # Registry order, as the workflow's config lists them: the run's METRICS rows follow it.
    return [kind.task for kind in REQUEST_KINDS if kind.task in names]


@functools.lru_cache(maxsize=4)
def benchmark_samples(
    data_root: str, tasks: tuple[str, ...], exclude: tuple[str, ...] = ()
) -> pa.Table:
    """The ingested SAMPLES of `tasks`, in the workflow's row order (memoized: the task and
    its metric both ask)."""

    samples, _ = ingest(data_root, tasks, exclude)
    return samples


def _frame_counts(rows: Iterable[Mapping[str, Any]]) -> dict[str, int | None]:
    """Each video's frame count as its manifest states it (as the prepare_videos job reads)."""
    counts: dict[str, int | None] = {}
    for row in rows:
        for item in row["media"]:
            if item["role"] == "video" and counts.get(item["resolved_path"]) is None:
                count = row.get("frame_count")
                counts[item["resolved_path"]] = None if count is None else int(count)
    return counts


def prompt_rows(
    rows: Sequence[Mapping[str, Any]],
    tasks: Sequence[str],
    store: Path,
    settings: ImageSettings,
    video_mode: str,
    video_frames: int,
) -> list[dict[str, Any]]:
    """PROMPTS rows of `tasks`, their media prepared into `store` first (once per source and
    settings: a store the workflow filled is reused as it is)."""
    images = image_sources(rows)
    prepare_images(images, store, settings)
    image_keys = {source: image_key(source, settings) for source in images}
    videos = video_sources(rows)
    video_keys = frames = None
    if videos:
        prepared = prepare_videos(
            videos,
            store,
            None if video_mode == "video_url" else video_frames,
            settings,
            _frame_counts(rows),
        )
        if video_mode == "video_url":
            video_keys = {row["source"]: row["keys"][0] for row in prepared}
        else:
            frames = {
                row["source"]: PreparedFrames(row["source"], row["keys"], row["timestamps"])
                for row in prepared
            }
    prompts: list[dict[str, Any]] = []
    for name in tasks:
        prompts += render_prompt_rows(rows, name, image_keys, video_keys, frames)
    return prompts


def _content(content: str | Sequence[Mapping[str, Any]]) -> str | list[Any]:
    """A message's content as inspect's: a string, or its blocks in order."""
    if isinstance(content, str):
        return content
    blocks: list[Any] = []
    for block in content:
        if block["type"] == "text":
            blocks.append(ContentText(text=block["text"]))
        elif block["type"] == "image_url":
            blocks.append(ContentImage(image=block["image_url"]["url"]))
        else:
            blocks.append(ContentVideo(video=block["video_url"]["url"], format="mp4"))
    return blocks


def chat_messages(messages: Sequence[Mapping[str, Any]]) -> list[ChatMessage]:
    """Our request messages (`build_messages`, media given as store paths) as inspect's."""
    kinds = {
        "system": ChatMessageSystem,
        "user": ChatMessageUser,
        "assistant": ChatMessageAssistant,
    }
    return [kinds[m["role"]](content=_content(m["content"])) for m in messages]


def model_settings(
    temperature: float | None,
    max_tokens: int | None,
    family: str | None,
    mode: str | None,
    extra_body: Mapping[str, Any] | None,
):
    """Our request settings (§11 defaults, the family's mode switch), via the same function
    that builds the workflow's requests from a model config."""
    model: dict[str, Any] = {"name": MODEL_LABEL + (f"-{mode}" if mode else "")}
    if family is not None:
        model["family"] = family
    if temperature is not None:
        model["temperature"] = temperature
    if max_tokens is not None:
        model["max_tokens"] = max_tokens
    if extra_body:
        model["extra_body"] = dict(extra_body)
    try:
        return request_settings(model)
    except ValueError as error:
        raise ConfigError(f"uav_dualcog: {error}") from error


def _value(cell: Any) -> Any:
    if isinstance(cell, bool) or cell is None:
        return None if cell is None else float(cell)
    if isinstance(cell, float) and math.isnan(cell):
        return None
    return cell


_IMAGE = {kind.task for kind in REQUEST_KINDS if kind.modality == "image"}

# Per-sample outcome columns of the SCORES rows, by request kind (scored task prefix for
# behavior, which is scored at two levels).
_SAMPLE_COLUMNS = {
    "image": ("valid", "option_correct", "bbox_hit", "iou", "joint_correct"),
    "behavior": ("valid", "set_exact", "sample_f1_50"),
    "landmark_visibility": ("valid", "count_correct", "sample_f1_50"),
}


def sample_value(scores: pa.Table, parse: str) -> dict[str, Any]:
    """One sample's outcomes in `parse` mode from its SCORES rows (1.0 / 0.0 for flags)."""
    value: dict[str, Any] = {}
    for row in scores.to_pylist():
        if row["parse"] != parse:
            continue
        kind = row["request_task"]
        columns = _SAMPLE_COLUMNS["image" if kind in _IMAGE else kind]
        prefix = f"{row['task']}/" if kind == "behavior" else ""
        for column in columns:
            if _value(row[column]) is not None:
                value[prefix + column] = _value(row[column])
    return value


def _answer(state: TaskState) -> Answer:
    failed = state.metadata.get(REQUEST_ERROR)
    if failed is not None:
        return Answer(None, failed["type"], failed["message"])
    output = state.output
    if output is None or output.error:
        return Answer(None, "error", output.error if output is not None else "no output")
    return Answer(output.completion)


REQUEST_ERROR = "dualcog_request_error"  # TaskState metadata key of a failed request


@solver
def answer_once() -> Solver:
    """inspect's generate (its provider retries included); a request that still fails is
    recorded and scored as unanswered, as the workflow keeps an error row: every sample of
    the run is then scored, so the metrics' population is exactly the samples run."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        try:
            return await generate(state, tool_calls="none")
        except LimitExceededError:
            raise
        except Exception as error:  # noqa: BLE001 (any provider's failure is a failed request)
            state.metadata[REQUEST_ERROR] = {
                "type": type(error).__name__,
                "message": str(error)[:2000],
            }
            return state

    return solve


@metric(name="dualcog_metrics")
def dualcog_metrics(
    data_root: str, tasks: list[str], exclude: list[str], bbox_scale: str | None
) -> Metric:
    """The workflow's METRICS rows (stratum `all`) of the whole run, keyed
    `<parse>/<task>/<metric>` (dualcog.integrations.evaluation.metric_key)."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        every = benchmark_samples(data_root, tuple(tasks), tuple(exclude))
        # The samples this run scored (all of them, or those --limit / --sample-id chose).
        ran = pa.array([str(item.sample_id) for item in scores], pa.string())
        samples = every.filter(pc.is_in(every["sample_id"], value_set=ran))
        answers = {}
        for item in scores:
            meta = item.score.metadata or {}
            answers[str(item.sample_id)] = Answer(
                meta.get("raw_text"), meta.get("error_type"), meta.get("error_message")
            )
        result = score_answers(MODEL_LABEL, samples, answers, bbox_scale=bbox_scale)
        metrics = result.metrics.filter(pc.equal(result.metrics["stratum"], "all"))
        return {k: v for k, v in metric_values(metrics).items() if not math.isnan(v)}

    return compute


@scorer(metrics=[])  # the metrics are given per task (they need its data root)
def dualcog_scorer(
    data_root: str, tasks: list[str], exclude: list[str], parse: str, bbox_scale: str | None
) -> Scorer:
    """Our parsers and scorer on one sample; the raw answer is kept for the run's metrics."""

    async def score(state: TaskState, target: Target) -> Score:
        samples = benchmark_samples(data_root, tuple(tasks), tuple(exclude))
        sample_id = str(state.sample_id)
        one = samples.filter(pc.equal(samples["sample_id"], sample_id))
        answer = _answer(state)
        result = score_answers(MODEL_LABEL, one, {sample_id: answer}, bbox_scale=bbox_scale)
        stages = {
            row["parse"]: row["stage"]
            for row in result.parsed.select(["parse", "stage"]).to_pylist()
        }
        return Score(
            value=sample_value(result.scores, parse),
            answer=answer.text,
            explanation=f"{parse} parse: stage {stages.get(parse)}",
            metadata={
                "raw_text": answer.text,
                "error_type": answer.error_type,
                "error_message": answer.error_message,
                "parse_stages": stages,
                "task": one["task"][0].as_py(),
                "difficulty": one["difficulty"][0].as_py(),
            },
        )

    return score


@task
def uav_dualcog(
    data_root: str = "resources/demo",
    tasks: str | list[str] | None = None,
    parse: str = "compatible",
    video_mode: str = "video_url",
    video_frames: int = 16,
    media_store: str = "results/media/store",
    bbox_scale: str | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    family: str | None = None,
    mode: str | None = None,
    exclude_samples: list[str] | None = None,
    extra_body: dict[str, Any] | None = None,
) -> Task:
    """UAV-DualCog (docs/inspect.md): `data_root` the released benchmark (or the demo),
    `tasks` request kinds (default all six), `parse` the mode each sample's Score shows
    (strict | compatible | legacy; the metrics carry every mode)."""
    if parse not in PARSE_MODES:
        raise ConfigError(f"uav_dualcog: parse={parse!r} is not one of {PARSE_MODES}")
    if video_mode not in VIDEO_MODES:
        raise ConfigError(f"uav_dualcog: video_mode={video_mode!r} is not one of {VIDEO_MODES}")
    root = str(Path(data_root).resolve())
    names = task_list(tasks)
    exclude = sorted(exclude_samples or [])
    if mode is not None and mode not in MODES:
        raise ConfigError(f"uav_dualcog: mode={mode!r} is not one of {MODES}")
    settings = model_settings(temperature, max_tokens, family, mode, extra_body)
    samples = benchmark_samples(root, tuple(names), tuple(exclude))
    rows = samples.to_pylist()
    store = Path(media_store)
    prompts = prompt_rows(rows, names, store, ImageSettings(), video_mode, video_frames)
    by_id = {row["sample_id"]: row for row in rows}
    dataset = []
    for prompt in prompts:
        row = by_id[prompt["sample_id"]]
        # Store paths, not data URIs: inspect reads a file when the request is sent.
        messages = build_messages(
            prompt, settings, store, data_uri=lambda s, key, kind: str(media_path(s, key, kind))
        )
        dataset.append(
            Sample(
                id=prompt["sample_id"],
                input=chat_messages(messages),
                target=gold_text(row),
                metadata={
                    "task": row["task"],
                    "difficulty": row["difficulty"],
                    "scene_id": row["scene_id"],
                    "request_key": prompt["request_key"],
                },
            )
        )
    config = GenerateConfig(
        temperature=settings.temperature,
        max_tokens=settings.max_tokens,
        extra_body=settings.extra_body or None,
        timeout=int(DEFAULT_TIMEOUT_S),  # the workflow's defaults (dualcog.inference.engine)
        max_retries=DEFAULT_MAX_RETRIES,
        max_connections=DEFAULT_CONCURRENCY,
    )
    return Task(
        dataset=MemoryDataset(dataset, name="UAV-DualCog", location=root),
        solver=answer_once(),
        scorer=dualcog_scorer(root, names, exclude, parse, bbox_scale),
        metrics=[dualcog_metrics(root, names, exclude, bbox_scale)],
        config=config,
        epochs=1,
        name="uav_dualcog",
    )
