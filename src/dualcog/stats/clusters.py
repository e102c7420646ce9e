"""Resampling units of the bootstrap and the seeded replicate weights over them.

Samples built from one place are not independent: image samples of one scene and landmark
share views and the landmark, and a mission's behavior and visibility samples share one
video. A replicate therefore redraws whole clusters (image: scene x landmark; video: the
mission's source trajectory, i.e. its `mission_id`), image and video clusters separately so
that every replicate holds as many clusters of each modality as the benchmark.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from dualcog.tasks import IMAGE_TASKS

MODALITY_GROUPS = ("image", "video")
# The samples columns `build_clusters` reads.
CLUSTER_COLUMNS = ["sample_id", "task", "scene_id", "landmark_id", "mission_id"]


@dataclass(frozen=True)
class Clusters:
    """The benchmark's clusters and which cluster every sample belongs to.

    `ids` are ordered by modality group, then by name; `index_of` maps a sample id to its
    position in `ids`; `group_sizes` counts the clusters of each modality group in order.
    """

    ids: tuple[str, ...]
    index_of: dict[str, int]
    group_sizes: tuple[int, ...]

    def __len__(self) -> int:
        return len(self.ids)

    def indices(self, sample_ids: pd.Series) -> np.ndarray:
        """Cluster position of every sample id; an id unknown to the benchmark is an error."""
        index = sample_ids.map(self.index_of)
        if index.isna().any():
            unknown = sample_ids[index.isna()].iloc[0]
            raise KeyError(f"sample {unknown!r} is not in the benchmark samples")
        return index.to_numpy(dtype=np.int64)


def _key_or_sample(parts: list[pd.Series], sample_ids: pd.Series) -> pd.Series:
    """Join key fields; a sample missing one becomes a cluster of its own."""
    complete = pd.concat(parts, axis=1).notna().all(axis=1)
    joined = parts[0].astype("string")
    for part in parts[1:]:
        joined = joined + "|" + part.astype("string")
    return joined.where(complete, "sample:" + sample_ids.astype("string")).astype(str)


def sample_clusters(samples: pd.DataFrame) -> pd.Series:
    """Cluster id of every sample (index: sample_id), prefixed by its modality group."""
    ids = samples["sample_id"].reset_index(drop=True)
    image = samples["task"].isin(IMAGE_TASKS).to_numpy()
    scene_landmark = _key_or_sample(
        [samples["scene_id"].reset_index(drop=True), samples["landmark_id"].reset_index(drop=True)],
        ids,
    )
    mission = _key_or_sample([samples["mission_id"].reset_index(drop=True)], ids)
    cluster = np.where(image, "image:" + scene_landmark, "video:" + mission)
    return pd.Series(cluster, index=ids.to_numpy(), name="cluster")


def build_clusters(samples: pd.DataFrame) -> Clusters:
    """Clusters of a benchmark samples table (one row per sample)."""
    if samples["sample_id"].duplicated().any():
        raise ValueError("samples hold duplicate sample ids")
    of_sample = sample_clusters(samples)
    ordered: list[str] = []
    sizes = []
    for group in MODALITY_GROUPS:
        names = sorted({c for c in of_sample.unique() if c.startswith(group + ":")})
        ordered += names
        sizes.append(len(names))
    position = {name: i for i, name in enumerate(ordered)}
    index_of = {sample: position[c] for sample, c in of_sample.items()}
    return Clusters(tuple(ordered), index_of, tuple(sizes))


def replicate_weights(group_sizes: tuple[int, ...], replicates: int, seed: int) -> np.ndarray:
    """(replicates, clusters) matrix: how often each cluster is drawn in each replicate.

    Each modality group's clusters are drawn with replacement as many times as it has
    clusters; the draw depends only on the group sizes, `replicates` and `seed`, so every
    model (and every paired comparison) sees the same replicates.
    """
    if replicates < 1:
        raise ValueError("bootstrap replicates must be at least 1")
    rng = np.random.default_rng(seed)
    blocks = []
    for size in group_sizes:
        if size == 0:
            blocks.append(np.zeros((replicates, 0)))
            continue
        blocks.append(rng.multinomial(size, np.full(size, 1.0 / size), size=replicates))
    return np.hstack(blocks).astype(np.float64)
