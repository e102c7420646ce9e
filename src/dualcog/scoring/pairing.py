"""Matched-context pairing of the benchmark's samples (docs/protocol.md §6), in plain Python.

One implementation, over the samples' columns as lists, on an Arrow table (`dual_pairs`).
It follows the pandas pairing it replaced value for value and row for row (stable sorts,
missing values last, k-th with k-th, the agent side's order); tests/scoring/test_pairing.py checks
it against that pandas code on random sample sets.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dualcog.tasks import IMAGE_DUAL_FAMILIES

if TYPE_CHECKING:
    import pyarrow as pa

# pyarrow (dualcog.schemas, scoring.schema) is imported by `dual_pairs` alone: the pairing
# itself is plain Python.

VIDEO_FAMILY = "video"
VIDEO_SIDES = ("behavior", "landmark_visibility")  # (agent-state, world-state)
FAMILY_SIDES: dict[str, tuple[str, str]] = {**IMAGE_DUAL_FAMILIES, VIDEO_FAMILY: VIDEO_SIDES}
IMAGE_PAIR_KEY = ["scene_id", "landmark_id", "difficulty", "context_slot"]
PAIR_COLUMNS = ["family", "agent_sample_id", "world_sample_id", "stratum"]
# The samples' columns pairing reads.
PAIR_INPUT_COLUMNS = [
    "sample_id", "task", "scene_id", "landmark_id", "difficulty", "context_index",
    "context_slot", "manifest_path", "manifest_order", "mission_id",
]  # fmt: skip


def _missing(value: Any) -> bool:
    """A missing value as pandas counts one: None or a float NaN."""
    return value is None or (isinstance(value, float) and value != value)


def _na_last(value: Any) -> tuple:
    """A sort key that puts missing values after every other (pandas' na_position="last")."""
    return (1, 0) if _missing(value) else (0, value)


def _image_pair_rows(columns: Mapping[str, Sequence], family: str, sides: tuple[str, str]):
    """Pairs of one image family: same key; several per side in a slot pair k-th with k-th
    (k counted in context_index then sample_id order, missing ones last), in the order of
    the agent-side samples in that order."""
    agent_task, world_task = sides
    task, sample_id = columns["task"], columns["sample_id"]
    key_columns = [columns[name] for name in IMAGE_PAIR_KEY]
    rows = [
        i
        for i in range(len(task))
        if task[i] in sides and not any(_missing(column[i]) for column in key_columns)
    ]
    context_index = columns["context_index"]
    rows.sort(key=lambda i: (_na_last(context_index[i]), _na_last(sample_id[i])))  # stable
    seen: dict[tuple, int] = {}
    agent, world = [], {}
    for i in rows:
        key = tuple(column[i] for column in key_columns)
        k = seen.get((key, task[i]), 0)
        seen[(key, task[i])] = k + 1
        if task[i] == agent_task:
            agent.append((key, k, i))
        elif task[i] == world_task:
            world[(key, k)] = i
    return [(family, i, world[(key, k)]) for key, k, i in agent if (key, k) in world]


def _video_pair_rows(columns: Mapping[str, Sequence]):
    """Behavior and visibility samples of one mission_id, first occurrence of each in
    manifest order (missing path or order last), in the behavior samples' order."""
    task, mission_id = columns["task"], columns["mission_id"]
    path, order = columns["manifest_path"], columns["manifest_order"]
    rows = [i for i in range(len(task)) if task[i] in VIDEO_SIDES]
    rows.sort(key=lambda i: (_na_last(path[i]), _na_last(order[i])))  # stable
    firsts: set[tuple] = set()
    behavior, visibility = [], {}
    for i in rows:
        if _missing(mission_id[i]) or (task[i], mission_id[i]) in firsts:
            continue
        firsts.add((task[i], mission_id[i]))
        if task[i] == "behavior":
            behavior.append(i)
        else:
            visibility[mission_id[i]] = i
    return [
        (VIDEO_FAMILY, i, visibility[mission_id[i]])
        for i in behavior
        if mission_id[i] in visibility
    ]


def dual_pair_rows(columns: Mapping[str, Sequence]) -> tuple[list[tuple], list[tuple]]:
    """Matched-context pairs of every family, and per (family, task) unpaired sample counts,
    from the samples' columns as plain lists (None or NaN for missing; no pandas).

    Pairs: (family, agent row, world row), family by family, a row being a sample's position
    in the columns; a pair's stratum is its agent-side sample's difficulty. Unpaired:
    (family, task, unpaired), unpaired being the samples of that side left without a partner
    (excluded from dual metrics), for each side with samples. Image samples missing a key
    field, or video samples without a mission_id or repeating an earlier mission_id of their
    task, are unpaired.
    """
    missing = [name for name in PAIR_INPUT_COLUMNS if name not in columns]
    if missing:
        raise KeyError(f"pairing needs the samples' columns {missing}")
    pairs = [
        row
        for family, sides in IMAGE_DUAL_FAMILIES.items()
        for row in _image_pair_rows(columns, family, sides)
    ]
    pairs += _video_pair_rows(columns)
    sample_id = columns["sample_id"]
    paired = {sample_id[i] for _, agent, world in pairs for i in (agent, world)}
    unpaired_by_task = Counter(
        task for task, sid in zip(columns["task"], sample_id, strict=True) if sid not in paired
    )
    present = set(columns["task"])
    unpaired = [
        (family, task, unpaired_by_task[task])
        for family, sides in FAMILY_SIDES.items()
        for task in sides
        if task in present
    ]
    return pairs, unpaired


def dual_pairs(samples: pa.Table) -> tuple[pa.Table, list[tuple]]:
    """`dual_pair_rows` of a SAMPLES table (at least PAIR_INPUT_COLUMNS): the pairs as a
    PAIRS table, and the unpaired counts as (family, task, unpaired) tuples."""
    from dualcog.schemas import table_from_columns
    from dualcog.scoring.schema import PAIRS

    columns = {name: samples.column(name).to_pylist() for name in PAIR_INPUT_COLUMNS}
    pairs, unpaired = dual_pair_rows(columns)
    sample_id, difficulty = columns["sample_id"], columns["difficulty"]
    pair_columns = [
        [family for family, _, _ in pairs],
        [sample_id[agent] for _, agent, _ in pairs],
        [sample_id[world] for _, _, world in pairs],
        [difficulty[agent] for _, agent, _ in pairs],
    ]
    return table_from_columns(pair_columns, PAIRS), unpaired
