"""Matched-context dual metrics (PROTOCOL §6): pairing samples, then paired co-success."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dualcog.tasks import IMAGE_DUAL_FAMILIES

VIDEO_FAMILY = "video"
VIDEO_SIDES = ("behavior", "landmark_visibility")  # (agent-state, world-state)
FAMILY_SIDES: dict[str, tuple[str, str]] = {**IMAGE_DUAL_FAMILIES, VIDEO_FAMILY: VIDEO_SIDES}
IMAGE_PAIR_KEY = ["scene_id", "landmark_id", "difficulty", "context_slot"]
PAIR_COLUMNS = ["family", "agent_sample_id", "world_sample_id", "stratum"]


def _image_pairs(samples: pd.DataFrame, family: str, sides: tuple[str, str]) -> pd.DataFrame:
    """Pairs of one image family: same key; several per side in a slot pair k-th with k-th."""
    agent_task, world_task = sides
    sub = samples[samples["task"].isin(sides)].dropna(subset=IMAGE_PAIR_KEY)
    sub = sub.sort_values(["context_index", "sample_id"], kind="stable")
    sub = sub.assign(k=sub.groupby(IMAGE_PAIR_KEY + ["task"], sort=False).cumcount())
    agent = sub[sub["task"] == agent_task][IMAGE_PAIR_KEY + ["k", "sample_id"]]
    world = sub[sub["task"] == world_task][IMAGE_PAIR_KEY + ["k", "sample_id"]]
    pairs = agent.merge(world, on=IMAGE_PAIR_KEY + ["k"], suffixes=("_agent", "_world"))
    return pd.DataFrame(
        {
            "family": family,
            "agent_sample_id": pairs["sample_id_agent"],
            "world_sample_id": pairs["sample_id_world"],
            "stratum": pairs["difficulty"],
        }
    )


def _video_pairs(samples: pd.DataFrame) -> pd.DataFrame:
    """Behavior and visibility samples of one mission_id, first occurrence of each."""
    ordered = samples[samples["task"].isin(VIDEO_SIDES)].sort_values(
        ["manifest_path", "manifest_order"], kind="stable", na_position="last"
    )
    first = ordered.dropna(subset=["mission_id"]).drop_duplicates(["task", "mission_id"])
    behavior = first[first["task"] == "behavior"][["mission_id", "sample_id", "difficulty"]]
    visibility = first[first["task"] == "landmark_visibility"][["mission_id", "sample_id"]]
    pairs = behavior.merge(visibility, on="mission_id", suffixes=("_agent", "_world"))
    return pd.DataFrame(
        {
            "family": VIDEO_FAMILY,
            "agent_sample_id": pairs["sample_id_agent"],
            "world_sample_id": pairs["sample_id_world"],
            "stratum": pairs["difficulty"],  # the behavior sample's difficulty band
        }
    )


def dual_pairs(samples: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Matched-context pairs of every family, and per (family, task) unpaired sample counts.

    Pairs: family, agent_sample_id, world_sample_id, stratum. Unpaired: family, task,
    unpaired (samples of that side left without a partner; these are excluded from dual
    metrics). Image samples missing a key field, or video samples without a mission_id or
    repeating an earlier mission_id of their task, are unpaired.
    """
    frames = [_image_pairs(samples, f, s) for f, s in IMAGE_DUAL_FAMILIES.items()]
    frames.append(_video_pairs(samples))
    pairs = pd.concat(frames, ignore_index=True)[PAIR_COLUMNS]
    paired = set(pairs["agent_sample_id"]) | set(pairs["world_sample_id"])
    counts = []
    for family, sides in FAMILY_SIDES.items():
        for task in sides:
            ids = samples.loc[samples["task"] == task, "sample_id"]
            if len(ids):
                counts.append((family, task, int((~ids.isin(paired)).sum())))
    unpaired = pd.DataFrame(counts, columns=["family", "task", "unpaired"])
    return pairs, unpaired


def pairs_for_tasks(pairs: pd.DataFrame, tasks) -> pd.DataFrame:
    """The pairs of the families whose two sides are both among `tasks`.

    A family's pairs depend only on the samples of its two tasks, so this equals
    `dual_pairs` of the samples restricted to `tasks`: the benchmark's pairs are computed
    once and every run, whatever tasks it ran, reads its own from them.
    """
    chosen = set(tasks)
    families = [f for f, sides in FAMILY_SIDES.items() if set(sides) <= chosen]
    return pairs[pairs["family"].isin(families)].reset_index(drop=True)


def _side_outcomes(scores: pd.DataFrame) -> pd.DataFrame:
    """Per (sample_id, parse): semantic/evidence success of that sample's side.

    A behavior side needs both of its levels; null flags count as failures.
    """
    flags = scores[["sample_id", "parse"]].assign(
        semantic_ok=scores["semantic_ok"].fillna(False).astype(bool),
        evidence_ok=scores["evidence_ok"].fillna(False).astype(bool),
    )
    return flags.groupby(["sample_id", "parse"], as_index=False)[
        ["semantic_ok", "evidence_ok"]
    ].all()


def _both(joined: pd.DataFrame, flag: str) -> np.ndarray:
    """Both sides succeeded; a side with no outcome (NaN after the join) failed."""
    agent = joined[f"agent_{flag}"].fillna(False).astype(bool).to_numpy()
    world = joined[f"world_{flag}"].fillna(False).astype(bool).to_numpy()
    return (agent & world).astype(float)


def dual_metrics(
    samples: pd.DataFrame, scores: pd.DataFrame, pairs: pd.DataFrame | None = None
) -> pd.DataFrame:
    """dual_semantic_acc / dual_evidence_acc rows (task = family) per parse mode and stratum.

    Parse modes are those in which the family's agent-state task was scored. A side without
    a score row in that mode (not scored, or no response) fails.
    """
    if pairs is None:
        pairs, _ = dual_pairs(samples)
    outcomes = _side_outcomes(scores)
    rows = []
    for family, (agent_task, _) in FAMILY_SIDES.items():
        family_pairs = pairs[pairs["family"] == family]
        if family_pairs.empty:
            continue
        request_of_row = scores["request_task"]
        modes = pd.unique(scores.loc[request_of_row == agent_task, "parse"])
        for parse in modes:
            mode = outcomes[outcomes["parse"] == parse].drop(columns="parse")
            joined = family_pairs.merge(
                mode.add_prefix("agent_"), on="agent_sample_id", how="left"
            ).merge(mode.add_prefix("world_"), on="world_sample_id", how="left")
            semantic = _both(joined, "semantic_ok")
            evidence = _both(joined, "evidence_ok")
            strata = joined["stratum"]
            for stratum in ["all", *sorted(strata.dropna().unique())]:
                mask = (
                    np.ones(len(joined), bool)
                    if stratum == "all"
                    else (strata == stratum).to_numpy()
                )
                n = int(mask.sum())
                if n == 0:
                    continue
                rows.append((family, parse, stratum, "dual_semantic_acc", semantic[mask].mean(), n))
                rows.append((family, parse, stratum, "dual_evidence_acc", evidence[mask].mean(), n))
    return pd.DataFrame(rows, columns=["task", "parse", "stratum", "metric", "value", "n"])
