"""Gold-aware offline backends: `oracle`, `random` and `simulated`.

They need no server and no cache. Every draw is seeded by (run seed, sample_id, purpose), so a
row's answer does not depend on row order or on which other samples are in the run.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from dualcog.backends import RunInputs
from dualcog.inference.progress import ProgressReporter
from dualcog.inference.rows import response_row
from dualcog.inference.values import as_list, canonical_json, is_missing, to_plain
from dualcog.repeats import run_seed
from dualcog.tasks import IMAGE_TASKS

SIMULATED_QUIRKS = (
    "fence",
    "prose",
    "think",
    "per_mille",
    "pixel640x480",
    "reversed_corners",
    "alias_keys",
    "garbage",
)
GARBAGE_TEXTS = (
    "I am unable to determine the answer from the provided media.",
    "The landmark appears near the center of the view; option unclear.",
    "Answer: could not be established with confidence",
)


def sample_seed(seed: int | str, sample_id: str, stream: str) -> int:
    """A 64-bit seed for one (run seed, sample, purpose); independent of row order."""
    digest = hashlib.sha256(f"{seed}\x00{sample_id}\x00{stream}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def _rng(seed: int | str, sample_id: str, stream: str) -> random.Random:
    return random.Random(sample_seed(seed, sample_id, stream))


def _round(value: float) -> float:
    return round(value, 4)


def random_box(rng: random.Random) -> list[float]:
    """Uniform valid normalized box: x1 < x2, y1 < y2 inside [0, 1]."""
    while True:
        x1, x2 = sorted(_round(rng.random()) for _ in range(2))
        y1, y2 = sorted(_round(rng.random()) for _ in range(2))
        if x1 < x2 and y1 < y2:
            return [x1, y1, x2, y2]


def jitter_box(box: list[float], rng: random.Random, jitter: float) -> list[float]:
    """Move each edge by up to `jitter` x the box size, kept valid inside [0, 1]."""
    x1, y1, x2, y2 = (float(v) for v in box)
    width, height = max(x2 - x1, 1e-3), max(y2 - y1, 1e-3)
    for _ in range(100):
        moved = [
            min(1.0, max(0.0, x1 + rng.uniform(-jitter, jitter) * width)),
            min(1.0, max(0.0, y1 + rng.uniform(-jitter, jitter) * height)),
            min(1.0, max(0.0, x2 + rng.uniform(-jitter, jitter) * width)),
            min(1.0, max(0.0, y2 + rng.uniform(-jitter, jitter) * height)),
        ]
        moved = [_round(v) for v in moved]
        if moved[0] < moved[2] and moved[1] < moved[3]:
            return moved
    return [_round(v) for v in (x1, y1, x2, y2)]


def random_intervals(rng: random.Random, count: int, duration: float) -> list[list[float]]:
    """`count` sorted, non-overlapping intervals inside [0, duration] (2·count sorted points)."""
    points = sorted(_round(rng.uniform(0.0, duration)) for _ in range(2 * count))
    return [[points[2 * i], points[2 * i + 1]] for i in range(count)]


def jitter_intervals(
    intervals: list[list[float]], rng: random.Random, jitter: float, duration: float
) -> list[list[float]]:
    """Shift each end by up to `jitter` x the interval length, kept inside [0, duration]."""
    moved = []
    for start, end in intervals:
        length = max(float(end) - float(start), 0.1)
        new_start = min(duration, max(0.0, float(start) + rng.uniform(-jitter, jitter) * length))
        new_end = min(duration, max(0.0, float(end) + rng.uniform(-jitter, jitter) * length))
        new_start, new_end = sorted((_round(new_start), _round(new_end)))
        moved.append([new_start, new_end])
    return moved


def _duration(sample: Mapping[str, Any]) -> float:
    duration = sample.get("duration_sec")
    if is_missing(duration):
        raise ValueError(f"video sample {sample['sample_id']} has no duration_sec")
    return float(duration)


def _intervals(value: Any) -> list[list[float]]:
    return [[float(s), float(e)] for s, e in (as_list(pair) for pair in as_list(value))]


def _offered(prompt: Mapping[str, Any], sample: Mapping[str, Any]) -> list[str]:
    offered = [str(o) for o in as_list(prompt.get("offered_option_ids"))]
    if not offered:
        offered = [str(o["option_id"]) for o in as_list(sample.get("options"))]
    if not offered:
        raise ValueError(f"sample {sample['sample_id']} offers no options")
    return offered


# --- oracle -----------------------------------------------------------------------------------


def oracle_answer(task: str, sample: Mapping[str, Any]) -> dict[str, Any]:
    """The canonical (docs/protocol.md §2) answer built from gold."""
    if task in IMAGE_TASKS:
        return {
            "answer_option_id": sample["gold_option_id"],
            "bbox_xyxy_norm": [float(v) for v in as_list(sample["gold_bbox"])],
        }
    if task == "behavior":
        return {
            "answers": [
                {"option_id": item["option_id"], "intervals_sec": _intervals(item["intervals"])}
                for item in as_list(sample["gold_items"])
            ]
        }
    if task == "landmark_visibility":
        return {
            "visible_count": int(sample["gold_visible_count"]),
            "visible_intervals_sec": _intervals(sample["gold_visible_intervals"]),
        }
    raise ValueError(f"unknown task {task!r}")


# --- random -----------------------------------------------------------------------------------


def random_answer(
    task: str, prompt: Mapping[str, Any], sample: Mapping[str, Any], seed: int | str
) -> dict[str, Any]:
    """Chance baseline: uniform option and box; random option subset / count with intervals."""
    rng = _rng(seed, str(prompt["sample_id"]), "random")
    if task in IMAGE_TASKS:
        offered = _offered(prompt, sample)
        return {"answer_option_id": rng.choice(offered), "bbox_xyxy_norm": random_box(rng)}
    duration = _duration(sample)
    if task == "behavior":
        offered = _offered(prompt, sample)
        chosen = rng.sample(offered, rng.randint(1, len(offered)))
        return {
            "answers": [
                {"option_id": option, "intervals_sec": random_intervals(rng, 1, duration)}
                for option in sorted(chosen)
            ]
        }
    if task == "landmark_visibility":
        count = rng.randint(0, 3)
        return {
            "visible_count": count,
            "visible_intervals_sec": random_intervals(rng, count, duration),
        }
    raise ValueError(f"unknown task {task!r}")


# --- simulated --------------------------------------------------------------------------------


def _candidate_box(sample: Mapping[str, Any], option: str) -> Any:
    for candidate in as_list(sample.get("candidates")):
        if candidate["option_id"] == option:
            return candidate["bbox"]
    return None


def simulated_answer(
    task: str,
    prompt: Mapping[str, Any],
    sample: Mapping[str, Any],
    seed: int | str,
    skill: float,
    jitter: float,
) -> dict[str, Any]:
    """A model that is right with probability `skill` (per field), near-right in its boxes."""
    rng = _rng(seed, str(prompt["sample_id"]), "answer")
    if task in IMAGE_TASKS:
        offered = _offered(prompt, sample)
        gold = str(sample["gold_option_id"])
        others = [o for o in offered if o != gold] or [gold]
        option = gold if rng.random() < skill else rng.choice(others)
        # A model localizes the landmark in the image it looked at: for Future Observation,
        # the candidate it selected (which is what docs/protocol.md §4 scores against).
        seen_box = _candidate_box(sample, option)
        target = [float(v) for v in as_list(sample["gold_bbox"] if seen_box is None else seen_box)]
        box = jitter_box(target, rng, jitter) if rng.random() < skill else random_box(rng)
        return {"answer_option_id": option, "bbox_xyxy_norm": box}
    duration = _duration(sample)
    if task == "behavior":
        offered = _offered(prompt, sample)
        answers = []
        gold_ids = set()
        for item in as_list(sample["gold_items"]):
            gold_ids.add(item["option_id"])
            if rng.random() < skill:
                intervals = jitter_intervals(_intervals(item["intervals"]), rng, jitter, duration)
                answers.append({"option_id": item["option_id"], "intervals_sec": intervals})
        distractors = [o for o in offered if o not in gold_ids]
        if distractors and (rng.random() >= skill or not answers):
            answers.append(
                {
                    "option_id": rng.choice(distractors),
                    "intervals_sec": random_intervals(rng, 1, duration),
                }
            )
        if not answers:  # every option is gold and all were dropped: claim one of them
            answers.append(
                {
                    "option_id": rng.choice(offered),
                    "intervals_sec": random_intervals(rng, 1, duration),
                }
            )
        return {"answers": sorted(answers, key=lambda a: a["option_id"])}
    if task == "landmark_visibility":
        if rng.random() < skill:
            gold_intervals = _intervals(sample["gold_visible_intervals"])
            return {
                "visible_count": int(sample["gold_visible_count"]),
                "visible_intervals_sec": jitter_intervals(gold_intervals, rng, jitter, duration),
            }
        count = rng.randint(0, 3)
        return {
            "visible_count": count,
            "visible_intervals_sec": random_intervals(rng, count, duration),
        }
    raise ValueError(f"unknown task {task!r}")


def _scale_box(box: list[float], quirks: set[str]) -> list[float | int]:
    if "per_mille" in quirks:
        return [round(v * 1000) for v in box]
    if "pixel640x480" in quirks:
        return [round(box[0] * 640), round(box[1] * 480), round(box[2] * 640), round(box[3] * 480)]
    return box


def _interval_objects(intervals: list[list[float]]) -> list[dict[str, float]]:
    return [{"start_sec": s, "end_sec": e} for s, e in intervals]


def apply_quirks(
    task: str,
    answer: dict[str, Any],
    quirks: set[str],
    rng: random.Random,
    garbage_rate: float,
    reversed_rate: float,
) -> str:
    """Render a canonical answer the way a quirky model would write it."""
    if "garbage" in quirks and rng.random() < garbage_rate:
        return rng.choice(GARBAGE_TEXTS)
    answer = to_plain(answer)
    if task in IMAGE_TASKS:
        box = _scale_box(answer["bbox_xyxy_norm"], quirks)
        if "reversed_corners" in quirks and rng.random() < reversed_rate:
            box = [box[2], box[3], box[0], box[1]]
        if "alias_keys" in quirks:
            answer = {"answer": answer["answer_option_id"], "box": box}
        else:
            answer = {"answer_option_id": answer["answer_option_id"], "bbox_xyxy_norm": box}
    elif "alias_keys" in quirks and task == "behavior":
        answer = {
            "answers": [
                {
                    "option_ids": [a["option_id"]],
                    "intervals_sec": _interval_objects(a["intervals_sec"]),
                }
                for a in answer["answers"]
            ]
        }
    elif "alias_keys" in quirks and task == "landmark_visibility":
        answer = {
            "visible_count": float(answer["visible_count"]),
            "visible_intervals_sec": _interval_objects(answer["visible_intervals_sec"]),
        }
    text = canonical_json(answer) if "fence" not in quirks else json_pretty(answer)
    if "fence" in quirks:
        text = f"```json\n{text}\n```"
    if "prose" in quirks:
        text = f"Looking at the media carefully, here is my answer.\n{text}\nHope this helps."
    if "think" in quirks:
        draft = canonical_json({"draft": answer, "confidence": round(rng.random(), 2)})
        text = (
            "<think>\nFirst candidate: {maybe the left one}. Draft: "
            f"{draft}. Let me check the views again.\n</think>\n{text}"
        )
    return text


def json_pretty(value: Any) -> str:
    return json.dumps(value, indent=2)


def _oracle_text(model: Mapping[str, Any], prompt: Mapping[str, Any], sample: Mapping) -> str:
    return canonical_json(oracle_answer(str(prompt["task"]), sample))


def _random_text(model: Mapping[str, Any], prompt: Mapping[str, Any], sample: Mapping) -> str:
    seed = run_seed(model)
    return canonical_json(random_answer(str(prompt["task"]), prompt, sample, seed))


def _simulated_text(model: Mapping[str, Any], prompt: Mapping[str, Any], sample: Mapping) -> str:
    task = str(prompt["task"])
    seed = run_seed(model)
    quirks = set(as_list(model.get("quirks")))
    unknown = quirks - set(SIMULATED_QUIRKS)
    if unknown:
        raise ValueError(f"unknown simulated quirks {sorted(unknown)}")
    answer = simulated_answer(
        task,
        prompt,
        sample,
        seed,
        skill=float(model.get("skill", 0.7)),
        jitter=float(model.get("jitter", 0.05)),
    )
    quirk_rng = _rng(seed, str(prompt["sample_id"]), "quirks")
    return apply_quirks(
        task,
        answer,
        quirks,
        quirk_rng,
        garbage_rate=float(model.get("garbage_rate", 0.1)),
        reversed_rate=float(model.get("reversed_rate", 0.3)),
    )


AnswerText = Callable[[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any]], str]


def _run_offline(
    answer_text: AnswerText,
    model: Mapping[str, Any],
    prompt_rows: list[dict[str, Any]],
    inputs: RunInputs,
) -> list[dict[str, Any]]:
    """One `ok` row per prompt row, its text made from the prompt and its sample."""
    name = str(model["name"])
    by_id = {row["sample_id"]: row for row in inputs.samples}
    tasks = "+".join(dict.fromkeys(str(row["task"]) for row in prompt_rows)) or model["backend"]
    reporter = ProgressReporter(f"{name}/{tasks}", len(prompt_rows), inputs.progress)
    rows = []
    for prompt in prompt_rows:
        sample = by_id.get(prompt["sample_id"])
        if sample is None:
            raise KeyError(f"sample {prompt['sample_id']!r} is in the prompts but not the samples")
        text = answer_text(model, prompt, sample)
        rows.append(response_row(prompt, name, model["backend"], raw_text=text, status="ok"))
        reporter.add("ok")
    reporter.finish()
    return rows


# The runners the registry names (dualcog.backends).
run_oracle = partial(_run_offline, _oracle_text)
run_random = partial(_run_offline, _random_text)
run_simulated = partial(_run_offline, _simulated_text)
