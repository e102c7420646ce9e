"""Generate a paper-scale synthetic UAV-DualCog benchmark (deterministic, never committed).

The released benchmark has 12 scenes, 512 landmarks, 4,096 image and 2,048 video samples.
This script builds a benchmark of that shape in the released layout by replicating the
embedded demo (resources/demo: 8 landmarks, each with 8 image and 4 video samples) over
new scene and landmark ids. Every media file is a copy of a demo file made distinct by a
few bytes that change no pixel (a JPEG comment segment, a trailing MP4 `free` box), so the
content-addressed media store sees as many distinct sources as a real benchmark of this
size would, while the pool of real media stays small.

Beside the benchmark it writes recorded runs of `--runs` simulated models in the authors'
`responses.jsonl` format (one file per scene and modality per run, as upstream), with the
demo recorder's quirks: fenced, prose-wrapped and think-block answers, per-mille boxes,
completion order, failed requests resumed later, requests that failed twice, truncated
reasoning, refusals and re-answered samples, in Instant/Thinking pairs over the paper's
model groups. `config/config.yaml` replays all of them (and runs the simulated ones):
`OUT` is a ready working directory (`snakemake --directory OUT`), the benchmark in `OUT/data`.

Usage: python scripts/make_paper_scale.py --out paper_scale [--scenes 12 --landmarks 512
       --runs 45 --simulated 0]   (the defaults are the paper's sizes; smaller ones give a
       scale test; `--simulated N` makes the last N runs seeded simulated models instead)
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import struct
import sys
from collections.abc import Iterator
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_demo  # noqa: E402  (the demo's recorder: same quirks, same authors' format)

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "resources" / "demo"
TASK_ROOT = make_demo.TASK_ROOT
IMAGE_DIR, VIDEO_DIR = "image_tasks/manifests", "video_tasks/datasets"
STAMP = "20250314_101500"
MODES = ("Instant", "Thinking")
GROUPS = ("proprietary", "open-weights", "spatial")  # the paper's model groups
SIMULATED_QUIRKS = ["per_mille", "fence", "think", "prose", "alias_keys"]
DATA_DIR = "data"  # the benchmark; the folder above it is the workflow's working directory


def demo_landmarks() -> list[tuple[str, str, list[dict], list[dict], dict, dict]]:
    """(scene id, landmark id, image samples, video samples, image head, video head)."""
    found = []
    for scene_dir in sorted((DEMO / TASK_ROOT).iterdir(), key=lambda p: int(p.name.split("_")[-1])):
        scene = scene_dir.name.removeprefix("airsim_")
        image = json.loads((scene_dir / IMAGE_DIR / f"{scene}.latest_manifest.json").read_text())
        video = json.loads((scene_dir / VIDEO_DIR / f"{scene}.latest_manifest.json").read_text())
        ids = list(dict.fromkeys(s["landmark_id"] for s in image["samples"]))
        for landmark in ids:
            found.append(
                (
                    scene,
                    landmark,
                    [s for s in image["samples"] if s["landmark_id"] == landmark],
                    [s for s in video["samples"] if s["landmark_id"] == landmark],
                    image,
                    video,
                )
            )
    return found


def renamer(old_scene: str, old_landmark: str, scene: str, landmark: str):
    """Rewrite ids and paths of one template landmark to a new scene and landmark id."""
    pattern = re.compile(
        rf"{old_scene}_{old_landmark}_|/{old_landmark}/|\"landmark_id\": \"{old_landmark}\""
        rf"|{old_scene}(?![0-9])"
    )

    def replace(match: re.Match) -> str:
        text = match.group(0)
        if text.startswith("/"):
            return f"/{landmark}/"
        if text.startswith('"'):
            return f'"landmark_id": "{landmark}"'
        if text.endswith("_"):
            return f"{scene}_{landmark}_"
        return scene

    return lambda text: pattern.sub(replace, text)


def media_paths(value) -> Iterator[str]:
    """Every media path (a .jpg or .mp4 string) inside a manifest sample."""
    if isinstance(value, dict):
        for item in value.values():
            yield from media_paths(item)
    elif isinstance(value, list):
        for item in value:
            yield from media_paths(item)
    elif isinstance(value, str) and value.endswith((".jpg", ".mp4")):
        yield value


def distinct_bytes(data: bytes, suffix: str, tag: str) -> bytes:
    """The same media with a marker that changes no decoded pixel."""
    marker = tag.encode()
    if suffix == ".jpg":
        assert data[:2] == b"\xff\xd8", "not a JPEG"
        return data[:2] + b"\xff\xfe" + struct.pack(">H", len(marker) + 2) + marker + data[2:]
    return data + struct.pack(">I", len(marker) + 8) + b"free" + marker  # an ISO BMFF box


def scene_landmark_counts(scenes: int, landmarks: int) -> list[int]:
    base, extra = divmod(landmarks, scenes)
    return [base + (1 if i < extra else 0) for i in range(scenes)]


def write_json(path: Path, content: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(content, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def build_benchmark(out: Path, scenes: int, landmarks: int) -> dict[str, dict[str, list[dict]]]:
    """Manifests and media under `out`; returns the samples per scene and modality."""
    templates = demo_landmarks()
    written: dict[str, dict[str, list[dict]]] = {}
    copied = 0
    for index, count in enumerate(scene_landmark_counts(scenes, landmarks)):
        scene = f"env_{index + 1}"
        image_samples, video_samples = [], []
        image_head = video_head = None
        for j in range(count):
            old_scene, old_landmark, image, video, image_head, video_head = templates[
                (index * 3 + j) % len(templates)
            ]
            rename = renamer(old_scene, old_landmark, scene, str(j + 1))
            new_image = json.loads(rename(json.dumps(image)))
            new_video = json.loads(rename(json.dumps(video)))
            old_paths = sorted(set(media_paths(image)) | set(media_paths(video)))
            for old in old_paths:
                new = rename(old)
                target = out / new
                if target.exists():
                    continue
                data = (DEMO / old).read_bytes()
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(distinct_bytes(data, target.suffix, new))
                copied += 1
            image_samples += new_image
            video_samples += new_video
        rename_head = renamer(old_scene, "\0", scene, "\0")
        folder = out / TASK_ROOT / f"airsim_{scene}"
        for head, samples, sub, name in (
            (image_head, image_samples, IMAGE_DIR, "qa"),
            (video_head, video_samples, VIDEO_DIR, "video"),
        ):
            head = json.loads(rename_head(json.dumps({**head, "samples": []})))
            manifest = {**head, "sample_count": len(samples), "samples": samples}
            manifest.pop("summary", None)
            write_json(folder / sub / f"{scene}.latest_manifest.json", manifest)
            write_json(
                folder / sub / f"{scene}_{name}_manifest_{len(samples)}samples_{STAMP}.json",
                manifest,
            )
        written[scene] = {"image": image_samples, "video": video_samples}
    print(f"copied {copied} media files", file=sys.stderr)
    return written


def run_name(i: int) -> str:
    """Runs come in Instant/Thinking pairs of one model, as in the paper's tables."""
    return f"sim-run-{i // 2 + 1:02d}-{MODES[i % 2]}"


def run_group(i: int) -> str:
    return GROUPS[(i // 2) % len(GROUPS)]


def simulated_models(first: int, count: int) -> list[dict]:
    """Models answered by the seeded `simulated` backend (one infer job per task), beside
    the replayed runs; each its own skill and output quirks."""
    models = []
    for i in range(first, first + count):
        rng = random.Random(2000 + i)
        models.append(
            {
                "name": run_name(i),
                "backend": "simulated",
                "group": run_group(i),
                "seed": 100 + i,
                "skill": round(0.3 + 0.6 * rng.random(), 2),
                "quirks": rng.sample(SIMULATED_QUIRKS, 2),
            }
        )
    return models


def write_runs(
    out: Path, data: Path, samples: dict[str, dict[str, list[dict]]], runs: int
) -> list[dict]:
    """responses.jsonl of every simulated run; returns the replay model configs (paths
    relative to `out`, the workflow's working directory)."""
    models = []
    for i in range(runs):
        name = run_name(i)
        rng = random.Random(1000 + i)
        # Each run its own ability: how often the gold option / items, how often a good box.
        make_demo.RUN_ID = f"paper_scale_{name}"
        make_demo.RUN_SKILL = 0.25 + 0.6 * rng.random()
        make_demo.RUN_BOX_NEAR_GOLD = 0.3 + 0.6 * rng.random()
        paths = []
        for scene, by_modality in samples.items():
            for modality, rows in by_modality.items():
                video = modality == "video"
                duplicate = not video and rng.random() < 0.5
                records = make_demo.recorded_rows(rng, rows, video, duplicate)
                path = (
                    data / TASK_ROOT / f"airsim_{scene}" / f"{modality}_tasks" / "experiments"
                    / make_demo.RUN_ID / "responses.jsonl"
                )  # fmt: skip
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(make_demo.jsonl_text(records), encoding="utf-8")
                paths.append(str(path.relative_to(out)))
        models.append(
            {
                "name": name,
                "backend": "replay",
                "group": run_group(i),
                "replay": paths,
            }
        )
    return models


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--scenes", type=int, default=12)
    parser.add_argument("--landmarks", type=int, default=512)
    parser.add_argument("--runs", type=int, default=45, help="model runs in all")
    parser.add_argument(
        "--simulated", type=int, default=0, help="how many of the runs use the simulated backend"
    )
    args = parser.parse_args()
    if args.landmarks < args.scenes:
        parser.error("--landmarks must be at least --scenes")
    out = args.out.resolve()
    data = out / DATA_DIR
    if data.exists():
        shutil.rmtree(data)  # a smaller earlier size must not linger
    samples = build_benchmark(data, args.scenes, args.landmarks)
    if not 0 <= args.simulated <= args.runs:
        parser.error("--simulated must be between 0 and --runs")
    replayed = args.runs - args.simulated
    models = write_runs(out, data, samples, replayed)
    models += simulated_models(replayed, args.simulated)
    config = {  # every table format: a paper needs the LaTeX, the report the HTML
        "data_root": DATA_DIR,
        "tables": {"formats": ["csv", "md", "tex", "html"]},
        "models": models,
    }
    config_path = out / "config" / "config.yaml"
    config_path.parent.mkdir(parents=True, exist_ok=True)
    config_path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    n_image = sum(len(s["image"]) for s in samples.values())
    n_video = sum(len(s["video"]) for s in samples.values())
    print(
        f"wrote {len(samples)} scenes, {args.landmarks} landmarks, {n_image} image and "
        f"{n_video} video samples, {replayed} recorded and {args.simulated} simulated runs "
        f"under {out} "
        f"(run it: snakemake --directory {out} --cores 2)"
    )


if __name__ == "__main__":
    main()
