"""Task registry: the seven scored tasks and six request kinds of docs/protocol.md §1."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Modality = Literal["image", "video"]
Cognition = Literal["agent-state", "world-state"]


@dataclass(frozen=True)
class RequestKind:
    """One kind of inference request; `task` is the id used in file names."""

    task: str
    upstream: str
    modality: Modality
    scored_as: tuple[str, ...]


@dataclass(frozen=True)
class ScoredTask:
    task: str
    display_name: str
    cognition: Cognition
    modality: Modality
    request: str


REQUEST_KINDS: tuple[RequestKind, ...] = (
    RequestKind("landmark_position", "self_where", "image", ("landmark_position",)),
    RequestKind("future_observation", "self_what", "image", ("future_observation",)),
    RequestKind("self_position", "env_where", "image", ("self_position",)),
    RequestKind("action_decision", "env_how", "image", ("action_decision",)),
    RequestKind(
        "behavior",
        "self_instance_recognition_joint",
        "video",
        ("composite_behavior", "atomic_behavior"),
    ),
    RequestKind(
        "landmark_visibility", "env_visibility_reasoning", "video", ("landmark_visibility",)
    ),
)

SCORED_TASKS: tuple[ScoredTask, ...] = (
    ScoredTask(
        "landmark_position",
        "Landmark-relative Position Reasoning",
        "agent-state",
        "image",
        "landmark_position",
    ),
    ScoredTask(
        "future_observation",
        "Action-conditioned Future Observation Prediction",
        "agent-state",
        "image",
        "future_observation",
    ),
    ScoredTask(
        "self_position",
        "Self-relative Position Reasoning",
        "world-state",
        "image",
        "self_position",
    ),
    ScoredTask(
        "action_decision",
        "Goal-conditioned Action Decision",
        "world-state",
        "image",
        "action_decision",
    ),
    ScoredTask("composite_behavior", "Composite Behavior", "agent-state", "video", "behavior"),
    ScoredTask("atomic_behavior", "Atomic Behavior", "agent-state", "video", "behavior"),
    ScoredTask(
        "landmark_visibility", "Landmark Visibility", "world-state", "video", "landmark_visibility"
    ),
)

REQUEST_BY_TASK = {kind.task: kind for kind in REQUEST_KINDS}
REQUEST_BY_UPSTREAM = {kind.upstream: kind for kind in REQUEST_KINDS}
SCORED_BY_TASK = {task.task: task for task in SCORED_TASKS}

IMAGE_TASKS: tuple[str, ...] = tuple(k.task for k in REQUEST_KINDS if k.modality == "image")
VIDEO_TASKS: tuple[str, ...] = tuple(k.task for k in REQUEST_KINDS if k.modality == "video")

# The image task whose prediction is scored against the chosen candidate's own box, and the
# levels of a behavior answer (scored as composite_behavior and atomic_behavior): here, not in
# dualcog.scoring, so that the explorer reads them without loading the scorer.
SELECTED_CANDIDATE_TASK = "future_observation"
BEHAVIOR_LEVELS = ("composite", "atomic")

IMAGE_DIFFICULTIES = ("4way", "8way")
VIDEO_DIFFICULTIES = ("easy", "medium", "hard")

# Dual families of docs/protocol.md §6: (agent-state side, world-state side).
IMAGE_DUAL_FAMILIES: dict[str, tuple[str, str]] = {
    "position": ("landmark_position", "self_position"),
    "action_observation": ("future_observation", "action_decision"),
}

PARSE_MODES = ("strict", "compatible", "legacy")

# Short column names of the tables and the explorer's task filters.
TASK_ABBREVIATIONS = {
    "landmark_position": "LP",
    "future_observation": "FO",
    "self_position": "SP",
    "action_decision": "AD",
    "composite_behavior": "Comp",
    "atomic_behavior": "Atom",
    "landmark_visibility": "Vis",
    "position": "Pos",
    "action_observation": "A-O",
    "video": "Video",
}
