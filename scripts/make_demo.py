"""Generate the embedded demo benchmark under resources/demo/ (deterministic).

The output mimics the released UAV-DualCog layout (docs/upstream_format.md §1-3) with the
workspace root at the output folder: 2 scenes x 4 landmarks, image manifests with all four
image task types and both difficulties, video manifests with one behavior and one visibility
sample per mission, synthetic JPEG views and H.264 videos whose gold boxes and visibility
intervals are exactly where the landmark is drawn.

Usage: python scripts/make_demo.py [--out resources/demo]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import av
from PIL import Image, ImageDraw

from dualcog.prompts.templates import render_prompt_texts

TASK_ROOT = "task_pipeline_data/UAV-DualCog-V1"
ENGINE = "airsim"
GENERATED_AT = "2025-03-14T10:15:00"
TIMESTAMP = "20250314_101500"
IMAGE_SIZE = (800, 600)  # 4:3 and larger than 640x480, so request-side downscaling is exercised
VIDEO_SIZE = (320, 240)
FPS = 10.0
JPEG_QUALITY = 70
BOX_RED = (255, 0, 0)
BOX_WIDTH = 5

VIEWS_8 = ("Front", "Front-Right", "Right", "Back-Right", "Back", "Back-Left", "Left", "Front-Left")
VIEWS_4 = ("Front", "Right", "Back", "Left")
EGO_VISIBLE = ("Front", "Front-Left", "Front-Right", "Left", "Right")  # in the forward camera
EGO_X_CENTRE = {"Left": 0.16, "Front-Left": 0.32, "Front": 0.5, "Front-Right": 0.68, "Right": 0.84}
ACTIONS_4 = ("Move forward", "Move backward", "Turn left", "Turn right")
ACTIONS_8 = ACTIONS_4 + ("Fly left", "Fly right", "Ascend", "Descend")
ACTION_FOR_DIRECTION = {
    "Front": "Move forward",
    "Front-Left": "Turn left",
    "Left": "Turn left",
    "Front-Right": "Turn right",
    "Right": "Turn right",
}
TURNS = {
    # steps of 45 degrees clockwise -> behavior phrase
    2: "a 90-degree clockwise turn around the landmark",
    -2: "a 90-degree counterclockwise turn around the landmark",
    4: "a 180-degree turn around the landmark",
    1: "a 45-degree clockwise turn around the landmark",
    -1: "a 45-degree counterclockwise turn around the landmark",
    3: "a 135-degree clockwise turn around the landmark",
}

GROUND_COLOURS = ((92, 118, 74), (104, 112, 86), (86, 104, 80))
BLOCK_COLOURS = ((128, 128, 128), (150, 146, 140), (96, 96, 104), (150, 122, 96), (70, 74, 70))

COMPOSITE_SETS: dict[str, tuple[str, tuple[str, ...]]] = {
    "circular_inspection": (
        "Circular inspection around the landmark",
        ("Ascend", "Orbit clockwise", "Descend"),
    ),
    "facade_scan": ("Vertical facade scan", ("Ascend", "Fly right", "Descend")),
    "approach_and_hover": ("Approach and hover", ("Move forward", "Hover")),
    "lateral_survey": ("Lateral survey pass", ("Fly left", "Turn right", "Move forward")),
    "departure_climb": ("Departure climb", ("Move backward", "Ascend")),
}
ATOMIC_LABELS = (
    "Ascend",
    "Descend",
    "Move forward",
    "Move backward",
    "Fly left",
    "Fly right",
    "Turn left",
    "Turn right",
    "Hover",
    "Orbit clockwise",
    "Orbit counterclockwise",
)


@dataclass(frozen=True)
class Landmark:
    landmark_id: str
    category: str
    description: str
    colour: tuple[int, int, int]
    shape: str
    has_diagonals: bool
    composite_set: str
    atomic_elements: tuple[str, ...]  # the atomic mission's elements, in order
    atomic_visible: tuple[tuple[int, int], ...]  # visible frame ranges of the atomic mission
    composite_visible: tuple[tuple[int, int], ...]
    composite_frames: int
    atomic_frames: int


@dataclass(frozen=True)
class Scene:
    scene_id: str
    seed: int
    landmarks: tuple[Landmark, ...]


SCENES = (
    Scene(
        "env_7",
        7007,
        (
            Landmark(
                landmark_id="12",
                category="water_tower",
                description="the magenta water tower",
                colour=(230, 40, 200),
                shape="circle",
                has_diagonals=True,
                composite_set="circular_inspection",
                atomic_elements=("Hover", "Ascend"),
                atomic_visible=((4, 22),),
                composite_visible=((0, 14), (31, 48)),
                composite_frames=49,
                atomic_frames=45,
            ),
            Landmark(
                landmark_id="31",
                category="office_building",
                description="the cyan office building",
                colour=(40, 210, 230),
                shape="square",
                has_diagonals=True,
                composite_set="facade_scan",
                atomic_elements=("Turn left", "Hover", "Turn left"),
                atomic_visible=((10, 40),),
                composite_visible=((6, 25),),
                composite_frames=55,
                atomic_frames=51,
            ),
            Landmark(
                landmark_id="45",
                category="church",
                description="the yellow church",
                colour=(245, 220, 40),
                shape="triangle",
                has_diagonals=True,
                composite_set="approach_and_hover",
                atomic_elements=("Fly right",),
                atomic_visible=((0, 9), (18, 27), (36, 44)),
                composite_visible=((12, 58),),
                composite_frames=61,
                atomic_frames=45,
            ),
            Landmark(
                landmark_id="58",
                category="radio_mast",
                description="the orange radio mast",
                colour=(250, 130, 20),
                shape="diamond",
                has_diagonals=True,
                composite_set="lateral_survey",
                atomic_elements=("Descend", "Move forward"),
                atomic_visible=((20, 41),),
                composite_visible=((3, 9), (30, 40)),
                composite_frames=41,
                atomic_frames=47,
            ),
        ),
    ),
    Scene(
        "env_12",
        12012,
        (
            Landmark(
                landmark_id="3",
                category="stadium",
                description="the blue stadium",
                colour=(40, 70, 235),
                shape="hexagon",
                has_diagonals=True,
                composite_set="circular_inspection",
                atomic_elements=("Orbit counterclockwise",),
                atomic_visible=((5, 30),),
                composite_visible=((8, 50),),
                composite_frames=57,
                atomic_frames=41,
            ),
            Landmark(
                landmark_id="17",
                category="warehouse",
                description="the purple warehouse",
                colour=(140, 50, 210),
                shape="cross",
                has_diagonals=True,
                composite_set="departure_climb",
                atomic_elements=("Move backward", "Turn right"),
                atomic_visible=((0, 12), (25, 49)),
                composite_visible=((15, 35),),
                composite_frames=43,
                atomic_frames=53,
            ),
            # No diagonal views: two 4way contexts and no 8way one (docs/upstream_format.md §2).
            Landmark(
                landmark_id="26",
                category="monument",
                description="the white monument",
                colour=(245, 245, 245),
                shape="star",
                has_diagonals=False,
                composite_set="facade_scan",
                atomic_elements=("Ascend", "Hover"),
                atomic_visible=((2, 44),),
                composite_visible=((20, 33),),
                composite_frames=51,
                atomic_frames=49,
            ),
            Landmark(
                landmark_id="40",
                category="pavilion",
                description="the lime-green pavilion",
                colour=(150, 250, 60),
                shape="octagon",
                has_diagonals=True,
                composite_set="approach_and_hover",
                atomic_elements=("Turn left", "Fly left"),
                atomic_visible=((7, 16),),
                composite_visible=((0, 10), (22, 45)),
                composite_frames=47,
                atomic_frames=59,
            ),
        ),
    ),
)

# Unit-square outlines (min 0 and max 1 on both axes) so a shape spans its box exactly.
SHAPES: dict[str, tuple[tuple[float, float], ...]] = {
    "square": ((0, 0), (1, 0), (1, 1), (0, 1)),
    "triangle": ((0.5, 0), (1, 1), (0, 1)),
    "diamond": ((0.5, 0), (1, 0.5), (0.5, 1), (0, 0.5)),
    "hexagon": ((0.25, 0), (0.75, 0), (1, 0.5), (0.75, 1), (0.25, 1), (0, 0.5)),
    "octagon": (
        (0.3, 0),
        (0.7, 0),
        (1, 0.3),
        (1, 0.7),
        (0.7, 1),
        (0.3, 1),
        (0, 0.7),
        (0, 0.3),
    ),
    "cross": (
        (0.33, 0),
        (0.67, 0),
        (0.67, 0.33),
        (1, 0.33),
        (1, 0.67),
        (0.67, 0.67),
        (0.67, 1),
        (0.33, 1),
        (0.33, 0.67),
        (0, 0.67),
        (0, 0.33),
        (0.33, 0.33),
    ),
    "star": (
        (0.5, 0),
        (0.62, 0.38),
        (1, 0.38),
        (0.69, 0.6),
        (0.81, 1),
        (0.5, 0.76),
        (0.19, 1),
        (0.31, 0.6),
        (0, 0.38),
        (0.38, 0.38),
    ),
}


# ----------------------------------------------------------------------------- media specs


@dataclass(frozen=True)
class ImageSpec:
    """A synthetic aerial view: `seed` fixes the background, the landmark fills `bbox`."""

    seed: int
    colour: tuple[int, int, int]
    shape: str
    bbox: tuple[float, float, float, float]
    red_box: bool = False


@dataclass(frozen=True)
class VideoSpec:
    seed: int
    colour: tuple[int, int, int]
    shape: str
    frame_count: int
    visible: tuple[tuple[int, int], ...]  # inclusive frame ranges
    web: bool = False


@dataclass
class DemoPlan:
    json_files: dict[str, object] = field(default_factory=dict)
    images: dict[str, ImageSpec] = field(default_factory=dict)
    videos: dict[str, VideoSpec] = field(default_factory=dict)
    jsonl_files: dict[str, list[dict]] = field(default_factory=dict)  # recorded run outputs


def draw_landmark(draw: ImageDraw.ImageDraw, shape: str, colour, box_px) -> None:
    """Fill pixels x1..x2-1, y1..y2-1 with the shape touching all four sides."""
    x1, y1, x2, y2 = box_px
    if shape == "circle":
        draw.ellipse((x1, y1, x2 - 1, y2 - 1), fill=colour)
        return
    width, height = x2 - 1 - x1, y2 - 1 - y1
    points = [(x1 + round(u * width), y1 + round(v * height)) for u, v in SHAPES[shape]]
    draw.polygon(points, fill=colour)


def draw_ground(draw: ImageDraw.ImageDraw, rng: random.Random, size, blocks: int) -> None:
    width, height = size
    draw.rectangle((0, 0, width, height), fill=rng.choice(GROUND_COLOURS))
    for _ in range(2):  # roads
        if rng.random() < 0.5:
            y = rng.randrange(height)
            draw.rectangle((0, y, width, y + height // 30), fill=(118, 110, 98))
        else:
            x = rng.randrange(width)
            draw.rectangle((x, 0, x + width // 40, height), fill=(118, 110, 98))
    for _ in range(blocks):
        w, h = rng.randint(width // 20, width // 8), rng.randint(height // 20, height // 8)
        x, y = rng.randrange(width - w), rng.randrange(height - h)
        draw.rectangle((x, y, x + w, y + h), fill=rng.choice(BLOCK_COLOURS))


def render_image(spec: ImageSpec) -> Image.Image:
    width, height = IMAGE_SIZE
    image = Image.new("RGB", IMAGE_SIZE)
    draw = ImageDraw.Draw(image)
    draw_ground(draw, random.Random(spec.seed), IMAGE_SIZE, blocks=14)
    x1, y1, x2, y2 = spec.bbox
    box_px = (round(x1 * width), round(y1 * height), round(x2 * width), round(y2 * height))
    draw_landmark(draw, spec.shape, spec.colour, box_px)
    if spec.red_box:
        draw.rectangle(
            (box_px[0], box_px[1], box_px[2] - 1, box_px[3] - 1), outline=BOX_RED, width=BOX_WIDTH
        )
    return image


def write_video(spec: VideoSpec, path: Path) -> None:
    """H.264 yuv420p at FPS; the landmark is drawn exactly in the `visible` frame ranges."""
    width, height = VIDEO_SIZE
    rng = random.Random(spec.seed)
    canvas = Image.new("RGB", (width * 2, height * 2))
    draw_ground(ImageDraw.Draw(canvas), rng, canvas.size, blocks=30)
    # The camera drifts over the ground; the landmark crosses the view while visible.
    drift_x, drift_y = rng.choice((-1, 1)) * rng.randint(2, 4), rng.choice((-1, 1)) * 2
    size = 56
    container_options = {"movflags": "+faststart"} if spec.web else {}
    with av.open(str(path), "w", format="mp4", container_options=container_options) as out:
        stream = out.add_stream("libx264", rate=Fraction(int(FPS)))
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.codec_context.options = {"crf": "30", "preset": "medium", "threads": "1"}
        stream.codec_context.flags |= av.codec.context.Flags.bitexact
        for index in range(spec.frame_count):
            offset_x = width // 2 + drift_x * index
            offset_y = height // 2 + drift_y * index
            offset_x %= width
            offset_y %= height
            frame_image = canvas.crop((offset_x, offset_y, offset_x + width, offset_y + height))
            for start, end in spec.visible:
                if start <= index <= end:
                    progress = (index - start) / max(1, end - start)
                    x = round(16 + progress * (width - size - 32))
                    y = height // 2 - size // 2 + round(20 * (progress - 0.5))
                    draw_landmark(
                        ImageDraw.Draw(frame_image),
                        spec.shape,
                        spec.colour,
                        (x, y, x + size, y + size),
                    )
            frame = av.VideoFrame.from_image(frame_image)
            frame.pts = index
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)


# ----------------------------------------------------------------------------- plan helpers


def view_file_name(index: int, name: str) -> str:
    return f"view_{index:02d}_{name.lower().replace('-', '_')}.jpg"


def random_box(rng: random.Random, centre_x: float | None = None) -> tuple[float, ...]:
    """A box on a 0.01 grid (exact pixels at 800x600), inside [0.04, 0.96]."""
    width = rng.randint(16, 30) / 100
    height = rng.randint(20, 36) / 100
    if centre_x is None:
        x1 = rng.randint(4, int(96 - width * 100)) / 100
    else:
        x1 = min(max(round(centre_x - width / 2, 2), 0.04), round(0.96 - width, 2))
    y1 = rng.randint(8, int(92 - height * 100)) / 100
    return (x1, y1, round(x1 + width, 2), round(y1 + height, 2))


def letters(count: int) -> list[str]:
    return [chr(ord("A") + i) for i in range(count)]


def with_letters(labels: list[str]) -> list[dict[str, str]]:
    return [
        {"option_id": oid, "label": label}
        for oid, label in zip(letters(len(labels)), labels, strict=True)
    ]


def write_path(scene: Scene, *parts: str) -> str:
    return "/".join((TASK_ROOT, f"airsim_{scene.scene_id}", *parts))


def raw_view_path(scene: Scene, landmark: Landmark, file_name: str) -> str:
    folder = f"scene_data/airsim_{scene.scene_id}/landmarks_raw/rgb_views/{landmark.landmark_id}"
    return f"{folder}/{file_name}"


def interval_dict(start: float, end: float) -> dict[str, float]:
    return {"start_sec": start, "end_sec": end}


def frame_time(index: int) -> float:
    return round(index / FPS, 3)


# ----------------------------------------------------------------------------- image tasks


@dataclass(frozen=True)
class RawView:
    index: int
    name: str
    path: str
    bbox: tuple[float, ...]


def plan_raw_views(
    plan: DemoPlan, scene: Scene, landmark: Landmark, rng: random.Random
) -> dict[str, RawView]:
    names = VIEWS_8 if landmark.has_diagonals else VIEWS_4
    views = {}
    for index, name in enumerate(names):
        path = raw_view_path(scene, landmark, view_file_name(index, name))
        bbox = random_box(rng)
        plan.images[path] = ImageSpec(rng.randrange(1 << 30), landmark.colour, landmark.shape, bbox)
        views[name] = RawView(index, name, path, bbox)
    return views


def reference_with_box(plan: DemoPlan, scene: Scene, landmark: Landmark, view: RawView, prefix):
    path = write_path(
        scene, "image_tasks/assets/reference_bbox", landmark.landmark_id, f"{prefix}_ref.jpg"
    )
    raw = plan.images[view.path]
    plan.images[path] = ImageSpec(raw.seed, raw.colour, raw.shape, raw.bbox, red_box=True)
    return path


def common_image_fields(
    scene: Scene, landmark: Landmark, sample_id: str, group: str, task_type, difficulty
):
    self_side = group == "self"
    return {
        "sample_id": sample_id,
        "scene_id": scene.scene_id,
        "engine": ENGINE,
        "landmark_id": landmark.landmark_id,
        "landmark_category": landmark.category,
        "landmark_description": landmark.description,
        "task_family": "qa",
        "task_group": "self-aware" if self_side else "environment-aware",
        "view_definition": "Self-Aware" if self_side else "Environment-Aware",
        "task_type": task_type,
        "difficulty": difficulty,
    }


def add_prompts(sample: dict, task: str, variables: dict) -> None:
    system_prompt, user_prompt = render_prompt_texts(task, variables)
    sample["prompt_text"] = user_prompt
    sample["user_prompt"] = user_prompt
    sample["system_prompt"] = system_prompt


def plan_self_context(plan, scene, landmark, views, difficulty, index, rng) -> list[dict]:
    labels = VIEWS_8 if difficulty == "8way" else VIEWS_4
    ring = VIEWS_8 if landmark.has_diagonals else VIEWS_4
    reference = views[rng.choice(labels)]
    target = views[rng.choice([name for name in labels if name != reference.name])]
    prefix = f"{scene.scene_id}_{landmark.landmark_id}_self_shared_{difficulty}_{index:06d}"
    ref_with_box = reference_with_box(plan, scene, landmark, reference, prefix)

    distractors = rng.sample([name for name in labels if name != target.name], 3)
    option_labels = [target.name, *distractors]
    rng.shuffle(option_labels)
    label_options = with_letters(option_labels)
    gold = label_options[option_labels.index(target.name)]["option_id"]
    shared = {
        "reference_image": reference.path,
        "reference_image_with_bbox": ref_with_box,
        "reference_bbox_xyxy_norm": list(reference.bbox),
        "reference_object_view": reference.name,
        "target_image": target.path,
    }
    where = common_image_fields(
        scene, landmark, f"{prefix}_where", "self", "self_where", difficulty
    )
    where.update(shared)
    where["answer_option_id"] = gold
    where["answer_bbox_xyxy_norm"] = list(target.bbox)
    add_prompts(
        where,
        "landmark_position",
        {
            "reference_object_view": reference.name,
            "landmark_description": landmark.description,
            "options": label_options,
        },
    )
    where["label_options"] = label_options
    where["reference_view"] = {
        "view_index": reference.index,
        "view_name": reference.name,
        "image": reference.path,
    }
    step = len(VIEWS_8) // len(ring)
    where["metadata"] = {
        "reference_view_index": reference.index,
        "target_view_index": target.index,
        "relative_yaw_deg": ((target.index - reference.index) * 45 * step) % 360,
        "distance_m": rng.randint(40, 90),
        "altitude_m": rng.randint(25, 60),
        "view_ring": list(ring),
    }

    # Future observation: rotate the reference view around the landmark.
    turn_steps = [s for s in TURNS if difficulty == "8way" or s % 2 == 0]
    steps = rng.choice(turn_steps)
    ring_steps = steps if len(ring) == 8 else steps // 2
    future = views[ring[(ring.index(reference.name) + ring_steps) % len(ring)]]
    others = rng.sample([name for name in labels if name != future.name], 3)
    candidate_views = [future, *(views[name] for name in others)]
    rng.shuffle(candidate_views)
    candidates = [
        {
            "option_id": oid,
            "image": view.path,
            "view_under_definition": view.name,
            "bbox_xyxy_norm": list(view.bbox),
        }
        for oid, view in zip(letters(4), candidate_views, strict=True)
    ]
    future_id = letters(4)[candidate_views.index(future)]
    what = common_image_fields(scene, landmark, f"{prefix}_what", "self", "self_what", difficulty)
    what.update(shared)  # target_image stays the self_where view: stale, as released
    what["answer_option_id"] = future_id
    what["answer_bbox_xyxy_norm"] = list(future.bbox)
    add_prompts(
        what,
        "future_observation",
        {
            "reference_object_view": reference.name,
            "landmark_description": landmark.description,
            "behavior_instance": TURNS[steps],
        },
    )
    what["candidates"] = candidates
    what["answer_option_ids"] = [future_id]
    what["behavior_instance"] = TURNS[steps]
    what["multi_select"] = False
    return [where, what]


def plan_env_context(plan, scene, landmark, views, difficulty, index, rng) -> list[dict]:
    labels = VIEWS_8 if difficulty == "8way" else VIEWS_4
    reference = views[rng.choice(labels)]
    prefix = f"{scene.scene_id}_{landmark.landmark_id}_env_shared_{difficulty}_{index:06d}"
    ref_with_box = reference_with_box(plan, scene, landmark, reference, prefix)
    direction = rng.choice([name for name in EGO_VISIBLE if name in labels])
    bbox = random_box(rng, centre_x=EGO_X_CENTRE[direction])
    observation = write_path(
        scene, "image_tasks/assets/env_observations", landmark.landmark_id, f"{prefix}_obs.jpg"
    )
    plan.images[observation] = ImageSpec(
        rng.randrange(1 << 30), landmark.colour, landmark.shape, bbox
    )
    shared = {
        "reference_image": reference.path,
        "reference_image_with_bbox": ref_with_box,
        "reference_bbox_xyxy_norm": list(reference.bbox),
        "reference_object_view": reference.name,
        "target_image": observation,
    }
    samples = []
    actions = ACTIONS_8 if difficulty == "8way" else ACTIONS_4
    for suffix, task_type, task, gold_label, universe in (
        ("where", "env_where", "self_position", direction, labels),
        ("how", "env_how", "action_decision", ACTION_FOR_DIRECTION[direction], actions),
    ):
        option_labels = [gold_label, *rng.sample([x for x in universe if x != gold_label], 3)]
        rng.shuffle(option_labels)
        label_options = with_letters(option_labels)
        sample = common_image_fields(
            scene, landmark, f"{prefix}_{suffix}", "env", task_type, difficulty
        )
        sample.update(shared)
        sample["answer_option_id"] = label_options[option_labels.index(gold_label)]["option_id"]
        sample["answer_bbox_xyxy_norm"] = list(bbox)
        add_prompts(
            sample,
            task,
            {"landmark_description": landmark.description, "options": label_options},
        )
        sample["label_options"] = label_options
        samples.append(sample)
    return samples


def plan_image_manifest(plan: DemoPlan, scene: Scene) -> None:
    rng = random.Random(scene.seed)
    samples: list[dict] = []
    index = 1
    for landmark in scene.landmarks:
        views = plan_raw_views(plan, scene, landmark, rng)
        difficulties = ("4way", "8way") if landmark.has_diagonals else ("4way", "4way")
        for difficulty in difficulties:
            samples += plan_self_context(plan, scene, landmark, views, difficulty, index, rng)
            samples += plan_env_context(plan, scene, landmark, views, difficulty, index + 1, rng)
            index += 2
    manifest = {
        "generation_id": f"{scene.scene_id}_qa_{TIMESTAMP}",
        "generated_at": GENERATED_AT,
        "scene_id": scene.scene_id,
        "engine": ENGINE,
        "sample_count": len(samples),
        "reference_main_only": True,
        "seed": scene.seed,
        "difficulties": ["4way", "8way"],
        "view_definitions": ["Self-Aware", "Environment-Aware"],
        "task_types": ["self_where", "self_what", "env_where", "env_how"],
        "selected_landmark_categories": sorted({lm.category for lm in scene.landmarks}),
        "samples": samples,
    }
    folder = write_path(scene, "image_tasks/manifests")
    plan.json_files[f"{folder}/{scene.scene_id}.latest_manifest.json"] = manifest
    name = f"{scene.scene_id}_qa_manifest_{len(samples)}samples_{TIMESTAMP}.json"
    plan.json_files[f"{folder}/{name}"] = manifest


# ----------------------------------------------------------------------------- video tasks


def split_frames(frame_count: int, parts: int, rng: random.Random) -> list[tuple[int, int]]:
    """Contiguous inclusive frame ranges covering 0..frame_count-1, each >= 8 frames."""
    cuts = sorted(rng.sample(range(8, frame_count - 8), parts - 1)) if parts > 1 else []
    while any(b - a < 8 for a, b in zip([0, *cuts], [*cuts, frame_count], strict=True)):
        cuts = sorted(rng.sample(range(8, frame_count - 8), parts - 1))
    bounds = [0, *cuts, frame_count]
    return [(bounds[i], bounds[i + 1] - 1) for i in range(parts)]


BANDS = (("easy", 0.12, 0.33), ("medium", 0.38, 0.62), ("hard", 0.68, 0.93))


def difficulty(rng: random.Random, band_index: int) -> tuple[float, str]:
    band, low, high = BANDS[band_index % 3]
    return round(rng.uniform(low, high), 3), band


def plan_video_manifest(plan: DemoPlan, scene: Scene) -> None:
    rng = random.Random(scene.seed * 31)
    composite_universe = sorted({COMPOSITE_SETS[lm.composite_set][0] for lm in scene.landmarks})
    samples: list[dict] = []
    mission_number = 0
    for landmark in scene.landmarks:
        ref_path = write_path(
            scene,
            "video_tasks/cache/assets/reference_bbox",
            landmark.landmark_id,
            f"{scene.scene_id}_{landmark.landmark_id}_video_ref.jpg",
        )
        ref_box = random_box(rng)
        plan.images[ref_path] = ImageSpec(
            rng.randrange(1 << 30), landmark.colour, landmark.shape, ref_box, red_box=True
        )
        for family in ("composite", "atomic"):
            mission_number += 1
            mission_id = (
                f"batch_{scene.scene_id}_{landmark.landmark_id}_{family}_"
                f"{mission_number:04d}_fill_01"
            )
            composite = family == "composite"
            if composite:
                set_id = landmark.composite_set
                composite_label, elements = COMPOSITE_SETS[set_id]
                frame_count, visible = landmark.composite_frames, landmark.composite_visible
            else:
                elements = landmark.atomic_elements
                set_id = "atomic_" + elements[0].lower().replace(" ", "_")
                frame_count, visible = landmark.atomic_frames, landmark.atomic_visible
            duration = frame_time(frame_count - 1)
            assert all(0 <= a < b < frame_count for a, b in visible), mission_id
            ranges = split_frames(frame_count, len(elements), rng)
            if not composite and len(elements) == 1:
                # a single atomic element need not fill the whole mission
                ranges = [(rng.randint(0, 6), frame_count - 1 - rng.randint(0, 6))]
            element_instances = [
                {
                    "element_index": i,
                    "behavior": label,
                    "start_frame": a,
                    "end_frame": b,
                    "start_sec": frame_time(a),
                    "end_sec": frame_time(b),
                }
                for i, (label, (a, b)) in enumerate(zip(elements, ranges, strict=True))
            ]
            # gold label -> intervals, in first-occurrence order
            gold: dict[str, list[tuple[float, float]]] = {}
            for label, (a, b) in zip(elements, ranges, strict=True):
                gold.setdefault(label, []).append((frame_time(a), frame_time(b)))
            atomic_distractors = [x for x in ATOMIC_LABELS if x not in gold]
            other_composites = [
                x for x in composite_universe if not composite or x != composite_label
            ]
            labels = list(gold)
            if composite:
                labels.insert(0, composite_label)
                labels += rng.sample(other_composites, rng.randint(1, 2))
            else:
                labels += rng.sample(other_composites, rng.randint(1, 2))
            labels += rng.sample(atomic_distractors, rng.randint(6, 8) - len(labels))
            rng.shuffle(labels)
            choice_options = with_letters(labels)
            id_of = {opt["label"]: opt["option_id"] for opt in choice_options}
            answer_items = [
                {
                    "option_id": id_of[label],
                    "label": label,
                    "intervals_sec": [interval_dict(s, e) for s, e in intervals],
                }
                for label, intervals in gold.items()
            ]
            if composite:
                answer_items.append(
                    {
                        "option_id": id_of[composite_label],
                        "label": composite_label,
                        "intervals_sec": [[0.0, duration]],
                    }
                )
            answer_items.sort(key=lambda item: item["option_id"])
            visible_intervals = [interval_dict(frame_time(a), frame_time(b)) for a, b in visible]

            video_path = write_path(
                scene, "video_tasks/missions", mission_id, "final_task/task_rgb.mp4"
            )
            web_path = write_path(
                scene, "video_tasks/missions", mission_id, "final_task/task_rgb_web.mp4"
            )
            video_seed = rng.randrange(1 << 30)
            for path, web in ((video_path, False), (web_path, True)):
                plan.videos[path] = VideoSpec(
                    video_seed, landmark.colour, landmark.shape, frame_count, visible, web
                )

            score, band = difficulty(rng, mission_number)
            mission_fields = {
                "scene_id": scene.scene_id,
                "engine": ENGINE,
                "mission_id": mission_id,
                "set_id": set_id,
                "element_instances": element_instances,
                "behavior_intervals_sec": [[frame_time(a), frame_time(b)] for a, b in ranges],
                "landmark_id": landmark.landmark_id,
                "landmark_description": landmark.description,
                "reference_image_with_bbox": ref_path,
                "reference_bbox_xyxy_norm": list(ref_box),
                "video_path": video_path,
                "video_web_path": web_path,
                "fps": FPS,
                "frame_count": frame_count,
                "video_width": VIDEO_SIZE[0],
                "video_height": VIDEO_SIZE[1],
                "visible_count": len(visible),
                "visible_intervals_sec": visible_intervals,
            }
            for form, group in (
                ("self_instance_recognition_joint", "self-state"),
                ("env_visibility_reasoning", "environmental"),
            ):
                sample = {
                    # one sample of each form per mission: k = 1
                    "sample_id": f"{scene.scene_id}_{mission_id}_{form}_{1:06d}",
                    "form": form,
                    "task_name": form,
                    "task_group": group,
                }
                sample.update(mission_fields)
                if form == "env_visibility_reasoning" and mission_number == 3:
                    # the pair's stratum is the behavior band; this visibility one differs
                    score, band = difficulty(rng, mission_number + 1)
                sample["difficulty_score"] = score
                sample["difficulty_band"] = band
                if form == "self_instance_recognition_joint":
                    add_prompts(
                        sample,
                        "behavior",
                        {
                            "landmark_description": landmark.description,
                            "duration_sec": duration,
                            "options": choice_options,
                        },
                    )
                    sample["choice_options"] = choice_options
                    sample["multi_select"] = True
                    sample["answer_option_ids"] = [item["option_id"] for item in answer_items]
                    sample["answer_items"] = answer_items
                else:
                    add_prompts(
                        sample,
                        "landmark_visibility",
                        {"landmark_description": landmark.description, "duration_sec": duration},
                    )
                    sample["gold_environment_answer"] = {
                        "visible_count": len(visible),
                        "visible_intervals_sec": visible_intervals,
                    }
                samples.append(sample)

    forms = ["self_instance_recognition_joint", "env_visibility_reasoning"]
    summary = {
        "mission_count": mission_number,
        "by_form": {form: sum(s["form"] == form for s in samples) for form in forms},
        "by_difficulty_band": {
            band: sum(s["difficulty_band"] == band for s in samples) for band, _, _ in BANDS
        },
    }
    manifest = {
        "generation_id": f"{scene.scene_id}_video_{TIMESTAMP}",
        "generated_at": GENERATED_AT,
        "scene_id": scene.scene_id,
        "engine": ENGINE,
        "mode": "batch",
        "sample_count": len(samples),
        "seed": scene.seed,
        "forms": forms,
        "include_temporal_localization": True,
        "task_group": "self-state+environmental",
        "samples": samples,
        "summary": summary,
    }
    folder = write_path(scene, "video_tasks/datasets")
    plan.json_files[f"{folder}/{scene.scene_id}.latest_manifest.json"] = manifest
    name = f"{scene.scene_id}_video_manifest_{len(samples)}samples_{TIMESTAMP}.json"
    plan.json_files[f"{folder}/{name}"] = manifest


# ----------------------------------------------------------------------------- recorded run

# An upstream run in the authors' format (docs/upstream_format.md §6), for the `replay` backend to
# rescore: one run id across scenes, its files per scene beside the manifests.
RUN_ID = "demo_recorded_run"
RUN_MODEL = "RecordedVLM-Instant"
RUN_REQUEST_MODEL = "recordedvlm-7b-instruct"
RUN_SKILL = 0.6  # chance of the gold option / the gold behavior items
RUN_BOX_NEAR_GOLD = 0.65  # chance of a box near the gold one
MAX_OUTPUT_TOKENS = 2048
CLIENT_RETRIES = 3
RUN_ERRORS = (
    "APITimeoutError: Request timed out.",
    "RateLimitError: Error code: 429 - {'error': {'message': 'Rate limit reached'}}",
    "InternalServerError: Error code: 503 - {'error': {'message': 'upstream overloaded'}}",
    "APIConnectionError: Connection error.",
)
# Think blocks and prose hold no braces, so the JSON is the only object in a text.
THINK_TEXT = {
    "image": (
        "The reference image marks {desc} with a red box. I compare its shape and colour with "
        "the other images and look for the same structure.",
        "First I locate {desc} in the reference view. Then I check which option is consistent "
        "with the change of viewpoint.",
        "Let me reason step by step. The landmark is {desc}; its position in the second view "
        "tells me the answer, and I estimate its box from the visible outline.",
    ),
    "video": (
        "I watch the flight from start to end and note when {desc} is in view and how the "
        "camera moves.",
        "The reference image shows {desc}. I track it through the video and split the flight "
        "into its manoeuvres.",
    ),
}
PROSE_BEFORE = {
    "image": (
        "After comparing the images, here is my answer:",
        "Based on the position of {desc}, the answer is:",
        "Sure. The result in the requested format:",
    ),
    "video": (
        "After watching the video, here is my answer:",
        "Sure. The result in the requested format:",
    ),
}
PROSE_AFTER = {
    "image": ("", "The box covers the visible part of the landmark.", "Hope this helps."),
    "video": ("", "Times are in seconds from the start of the video.", "Hope this helps."),
}
TRUNCATED_THINK = {
    "image": (
        "<think>\nThe reference view shows {desc} inside the red box. To answer I have to "
        "work out the camera heading in the second image. The roads run in a different "
        "direction there, so the drone has turned. If it turned clockwise the landmark should "
        "appear on the left, but the colours of the roofs nearby are similar, so I must be "
        "careful. Let me compare the images once more from the top left corner"
    ),
    "video": (
        "<think>\nI need to study every frame. At the start the drone is above the road and "
        "{desc} is not visible yet. Then the camera turns and the landmark enters the view; I "
        "should check whether it leaves and enters again, because each entry is a separate "
        "interval. The colours are similar to the roofs nearby, so I must be careful not to "
        "confuse them with the landmark. Let me go through the frames once more from the "
        "beginning"
    ),
}
REFUSAL = "I'm sorry, but I cannot identify the marked landmark in the second image."


def gold_pairs(intervals) -> list[tuple[float, float]]:
    """Released intervals come as {"start_sec","end_sec"} dicts or [s, e] pairs."""
    return [
        (i["start_sec"], i["end_sec"]) if isinstance(i, dict) else (i[0], i[1]) for i in intervals
    ]


def per_mille_box(box) -> list[int]:
    return [min(1000, max(0, round(v * 1000))) for v in box]


def answer_box(rng: random.Random, gold) -> list[int]:
    if rng.random() < RUN_BOX_NEAR_GOLD:
        x1, y1, x2, y2 = (v + rng.uniform(-0.03, 0.03) for v in gold)
        return per_mille_box((x1, y1, max(x2, x1 + 0.05), max(y2, y1 + 0.05)))
    return per_mille_box(random_box(rng))


def image_answer(rng: random.Random, sample: dict, avoid: str | None = None) -> dict:
    offered = [o["option_id"] for o in sample.get("label_options") or sample["candidates"]]
    gold = sample["answer_option_id"]
    option = gold if rng.random() < RUN_SKILL else rng.choice([o for o in offered if o != gold])
    if option == avoid:  # a rerun that changed its mind
        option = rng.choice([o for o in offered if o != avoid])
    return {
        "answer_option_id": option,
        "bbox_xyxy_norm": answer_box(rng, sample["answer_bbox_xyxy_norm"]),
    }


def noisy_interval(rng: random.Random, start: float, end: float, duration: float):
    start = min(max(0.0, start + rng.uniform(-0.6, 0.6)), duration - 0.2)
    end = min(max(start + 0.2, end + rng.uniform(-0.6, 0.6)), duration)
    return [round(start, 1), round(end, 1)]


def random_interval(rng: random.Random, duration: float) -> list[float]:
    start = rng.uniform(0.0, duration * 0.6)
    return [round(start, 1), round(min(duration, start + rng.uniform(1.0, 2.5)), 1)]


def behavior_answer(rng: random.Random, sample: dict) -> dict:
    duration = (sample["frame_count"] - 1) / sample["fps"]
    gold_ids = {item["option_id"] for item in sample["answer_items"]}
    answers = [
        {
            "option_id": item["option_id"],
            "intervals_sec": [
                noisy_interval(rng, s, e, duration) for s, e in gold_pairs(item["intervals_sec"])
            ],
        }
        for item in sample["answer_items"]
        if rng.random() < RUN_SKILL + 0.15
    ]
    if not answers or rng.random() < 0.4:  # a distractor claimed as well
        distractor = rng.choice(
            [o["option_id"] for o in sample["choice_options"] if o["option_id"] not in gold_ids]
        )
        answers.append({"option_id": distractor, "intervals_sec": [random_interval(rng, duration)]})
    answers.sort(key=lambda item: item["option_id"])
    return {"answers": answers}


def visibility_answer(rng: random.Random, sample: dict) -> dict:
    duration = (sample["frame_count"] - 1) / sample["fps"]
    intervals = [
        noisy_interval(rng, s, e, duration) for s, e in gold_pairs(sample["visible_intervals_sec"])
    ]
    roll = rng.random()
    if roll < 0.2 and len(intervals) > 1:
        intervals.pop(rng.randrange(len(intervals)))  # two appearances seen as one
    elif roll < 0.35:
        intervals.append(random_interval(rng, duration))  # a look-alike counted
        intervals.sort()
    return {"visible_count": len(intervals), "visible_intervals_sec": intervals}


def answer_text(rng: random.Random, answer: dict, description: str, modality: str) -> str:
    """The answer wrapped like real model output: plain JSON, fence, prose or a think block."""
    compact = json.dumps(answer)
    roll = rng.random()
    if roll < 0.4:
        return compact
    if roll < 0.65:
        return f"```json\n{json.dumps(answer, indent=2)}\n```"
    if roll < 0.8:
        before = rng.choice(PROSE_BEFORE[modality]).format(desc=description)
        after = rng.choice(PROSE_AFTER[modality])
        return f"{before}\n{compact}\n{after}".rstrip()
    think = rng.choice(THINK_TEXT[modality]).format(desc=description)
    return f"<think>\n{think}\n</think>\n\n{compact}"


@dataclass(frozen=True)
class RecordedAnswer:
    raw_text: str
    finish_reason: str
    option: str | None = None  # the image option answered, if any


def recorded_answer(
    rng: random.Random, sample: dict, style: str = "", avoid: str | None = None
) -> RecordedAnswer:
    description = sample["landmark_description"]
    modality = "image" if "task_type" in sample else "video"
    if style == "refusal":
        return RecordedAnswer(REFUSAL, "stop")
    if style == "truncated":  # ran out of output tokens inside its reasoning
        return RecordedAnswer(TRUNCATED_THINK[modality].format(desc=description), "length")
    if modality == "image":
        answer = image_answer(rng, sample, avoid)
        text = answer_text(rng, answer, description, modality)
        return RecordedAnswer(text, "stop", answer["answer_option_id"])
    if sample["form"] == "self_instance_recognition_joint":
        answer = behavior_answer(rng, sample)
    else:
        answer = visibility_answer(rng, sample)
    return RecordedAnswer(answer_text(rng, answer, description, modality), "stop")


def ok_row(rng: random.Random, sample: dict, answer: RecordedAnswer, video: bool) -> dict:
    retries = 1 if rng.random() < 0.1 else 0  # a rate-limited attempt the client retried
    completion_tokens = (
        MAX_OUTPUT_TOKENS if answer.finish_reason == "length" else max(1, len(answer.raw_text) // 4)
    )
    prompt_tokens = rng.randint(9000, 16000) if video else rng.randint(1500, 2600)
    return {
        "run_id": RUN_ID,
        "sample_id": sample["sample_id"],
        "request_status": "ok",
        "latency_ms": round(rng.uniform(8000, 25000) if video else rng.uniform(1800, 6500), 1),
        "raw_text": answer.raw_text,
        "raw_response": {
            "finish_reason": answer.finish_reason,
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
            "request_retry_attempts": retries,
            "request_retry_errors": [RUN_ERRORS[1]] * retries,
        },
    }


def error_row(rng: random.Random, sample: dict) -> dict:
    error = rng.choice(RUN_ERRORS)
    timed_out = error.startswith("APITimeoutError")
    return {
        "run_id": RUN_ID,
        "sample_id": sample["sample_id"],
        "request_status": "error",
        "latency_ms": 600000.0 if timed_out else round(rng.uniform(200, 1500), 1),
        "raw_text": rng.choice((None, "")),
        "raw_response": {
            "finish_reason": None,
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
            "request_retry_attempts": CLIENT_RETRIES,
            "request_retry_errors": [error] * CLIENT_RETRIES,
            "error": error,
        },
    }


def recorded_rows(rng: random.Random, samples: list[dict], video: bool, duplicate: bool):
    """Responses in completion order: a first pass, then the resumed run appends.

    Roles: `resumed` fails first and succeeds on resume; `error_only` fails both times
    (missing); `duplicate` is answered again on resume with another option (the last ok row
    wins); `truncated` / `refusal` are ok rows without a usable answer.
    """
    order = list(samples)
    rng.shuffle(order)
    roles = ["resumed", "resumed", "error_only", "truncated"]
    if duplicate:
        roles += ["duplicate", "refusal"]
    role_of = {s["sample_id"]: role for s, role in zip(order[-len(roles) :], roles, strict=True)}
    rng.shuffle(order)  # the role samples end up anywhere in the first pass
    first_pass, resumed = [], []
    for sample in order:
        role = role_of.get(sample["sample_id"], "")
        if role in ("resumed", "error_only"):
            first_pass.append(error_row(rng, sample))
            resumed.append(
                error_row(rng, sample)
                if role == "error_only"
                else ok_row(rng, sample, recorded_answer(rng, sample), video)
            )
            continue
        style = role if role in ("truncated", "refusal") else ""
        answer = recorded_answer(rng, sample, style)
        first_pass.append(ok_row(rng, sample, answer, video))
        if role == "duplicate":
            again = recorded_answer(rng, sample, avoid=answer.option)
            resumed.append(ok_row(rng, sample, again, video))
    return first_pass + resumed


def plan_recorded_run(plan: DemoPlan, scene: Scene) -> None:
    """responses.jsonl and requests.jsonl of the run, for the image and the video tasks."""
    for kind, folder, offset in (
        ("image", "image_tasks/manifests", 1),
        ("video", "video_tasks/datasets", 2),
    ):
        manifest = plan.json_files[
            f"{write_path(scene, folder)}/{scene.scene_id}.latest_manifest.json"
        ]
        rng = random.Random(scene.seed * 53 + offset)
        video = kind == "video"
        # one sample answered twice (image tasks of the first scene)
        duplicate = not video and scene is SCENES[0]
        rows = recorded_rows(rng, manifest["samples"], video, duplicate)
        run_folder = write_path(scene, f"{kind}_tasks/experiments/{RUN_ID}")
        plan.jsonl_files[f"{run_folder}/responses.jsonl"] = rows
        plan.jsonl_files[f"{run_folder}/requests.jsonl"] = [
            {
                "run_id": RUN_ID,
                "sample_id": row["sample_id"],
                "model": RUN_MODEL,
                "request_model": RUN_REQUEST_MODEL,
            }
            for row in rows
        ]


# ----------------------------------------------------------------------------- output


def build_plan() -> DemoPlan:
    plan = DemoPlan()
    for scene in SCENES:
        plan_image_manifest(plan, scene)
        plan_video_manifest(plan, scene)
        plan_recorded_run(plan, scene)
    return plan


def manifest_text(content: object) -> str:
    return json.dumps(content, indent=2, ensure_ascii=False) + "\n"


def jsonl_text(rows: list[dict]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def write_demo(out: Path, plan: DemoPlan) -> None:
    for folder in ("task_pipeline_data", "scene_data"):
        if (out / folder).exists():
            shutil.rmtree(out / folder)  # stale files from an earlier layout must not linger
    for relative, content in plan.json_files.items():
        path = out / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(manifest_text(content), encoding="utf-8")
    for relative, rows in plan.jsonl_files.items():
        path = out / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(jsonl_text(rows), encoding="utf-8")
    for relative, spec in plan.images.items():
        path = out / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        render_image(spec).save(path, format="JPEG", quality=JPEG_QUALITY)
    for relative, spec in plan.videos.items():
        path = out / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        write_video(spec, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("resources/demo"))
    args = parser.parse_args()
    plan = build_plan()
    write_demo(args.out, plan)
    print(
        f"wrote {len(plan.json_files)} manifests, {len(plan.jsonl_files)} recorded-run files, "
        f"{len(plan.images)} images, {len(plan.videos)} videos under {args.out}"
    )


if __name__ == "__main__":
    main()
