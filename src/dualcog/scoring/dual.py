"""Matched-context dual metrics (docs/protocol.md §6): pairing samples, then paired co-success."""

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


def _success_by_sample(codes: np.ndarray, flag: np.ndarray, n_codes: int) -> np.ndarray:
    """Per sample code: it has a score row and every one of its rows succeeded (a behavior
    side needs both of its levels; a null flag counts as a failure)."""
    present = np.bincount(codes, minlength=n_codes) > 0
    failed = np.bincount(codes[~flag], minlength=n_codes) > 0
    return present & ~failed


def _flag(scores: pd.DataFrame, name: str) -> np.ndarray:
    return scores[name].fillna(False).astype(bool).to_numpy()


def dual_metrics(
    samples: pd.DataFrame, scores: pd.DataFrame, pairs: pd.DataFrame | None = None
) -> pd.DataFrame:
    """dual_semantic_acc / dual_evidence_acc rows (task = family) per parse mode and stratum.

    Parse modes are those in which the family's agent-state task was scored. A side without
    a score row in that mode (not scored, or no response) fails.
    """
    if pairs is None:
        pairs, _ = dual_pairs(samples)
    # One integer code per sample id, shared by the score rows and both sides of every pair.
    codes, uniques = pd.factorize(
        pd.concat(
            [scores["sample_id"], pairs["agent_sample_id"], pairs["world_sample_id"]],
            ignore_index=True,
        )
    )
    n_scores, n_pairs, n_codes = len(scores), len(pairs), len(uniques)
    score_code = codes[:n_scores]
    agent_code = codes[n_scores : n_scores + n_pairs]
    world_code = codes[n_scores + n_pairs :]
    parse = scores["parse"].to_numpy(dtype=object)
    semantic, evidence = _flag(scores, "semantic_ok"), _flag(scores, "evidence_ok")
    family_of = pairs["family"].to_numpy(dtype=object)
    stratum_of = pairs["stratum"]
    request_task = scores["request_task"].to_numpy(dtype=object)
    rows = []
    for family, (agent_task, _) in FAMILY_SIDES.items():
        in_family = family_of == family
        if not in_family.any():
            continue
        agent, world = agent_code[in_family], world_code[in_family]
        strata = stratum_of[in_family]
        masks = [("all", np.ones(len(agent), bool))] + [
            (stratum, (strata == stratum).to_numpy())
            for stratum in sorted(strata.dropna().unique())
        ]
        for mode in pd.unique(parse[request_task == agent_task]):
            in_mode = parse == mode
            success = {}
            for metric, flag in (("dual_semantic_acc", semantic), ("dual_evidence_acc", evidence)):
                ok = _success_by_sample(score_code[in_mode], flag[in_mode], n_codes)
                success[metric] = (ok[agent] & ok[world]).astype(float)
            for stratum, mask in masks:
                n = int(mask.sum())
                if n == 0:
                    continue
                for metric, both in success.items():
                    rows.append((family, mode, stratum, metric, both[mask].mean(), n))
    return pd.DataFrame(rows, columns=["task", "parse", "stratum", "metric", "value", "n"])
