"""Resampling units of the bootstrap and the seeded replicate weights over them.

Samples built from one place are not independent: image samples of one scene and landmark
share views and the landmark, and a mission's behavior and visibility samples share one
video. A replicate therefore redraws whole clusters (image: scene x landmark; video: the
mission's source trajectory, i.e. its `mission_id`), image and video clusters separately so
that every replicate holds as many clusters of each modality as the benchmark.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dualcog.errors import DataError
from dualcog.stats.schema import REPLICATE_WEIGHTS
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
    # `index_of` as Arrow hash look-ups: the sample ids, and each one's cluster position.
    sample_ids: pa.Array | None = field(default=None, compare=False, repr=False)
    positions: np.ndarray | None = field(default=None, compare=False, repr=False)

    def __len__(self) -> int:
        return len(self.ids)

    def indices(self, sample_ids: pa.Array | pa.ChunkedArray | Iterable[str]) -> np.ndarray:
        """Cluster position of every sample id (an Arrow array, a Series, any iterable); an id
        unknown to the benchmark is an error."""
        if isinstance(sample_ids, pa.Array | pa.ChunkedArray):
            if self.sample_ids is not None and pa.types.is_string(sample_ids.type):
                found = pc.index_in(sample_ids, value_set=self.sample_ids)
                if found.null_count == 0:
                    at = found.to_numpy(zero_copy_only=False)
                    return self.positions[np.asarray(at, dtype=np.int64)]
            sample_ids = sample_ids.to_pylist()  # an unknown id: named below
        ids = list(sample_ids)
        try:
            return np.fromiter((self.index_of[s] for s in ids), dtype=np.int64, count=len(ids))
        except KeyError as unknown:
            raise KeyError(f"sample {unknown.args[0]!r} is not in the benchmark samples") from None


def _present(value: object) -> bool:
    return value is not None


def _cluster_name(sample_id: str, task: str, scene: object, landmark: object, mission: object):
    """Cluster id of one sample, prefixed by its modality group; a sample missing a key field
    is a cluster of its own."""
    if task in IMAGE_TASKS:
        complete = _present(scene) and _present(landmark)
        return f"image:{scene}|{landmark}" if complete else f"image:sample:{sample_id}"
    return f"video:{mission}" if _present(mission) else f"video:sample:{sample_id}"


def build_clusters(samples: pa.Table) -> Clusters:
    """Clusters of a benchmark samples table (one row per sample, at least CLUSTER_COLUMNS)."""
    columns = [samples[name].to_pylist() for name in CLUSTER_COLUMNS]
    sample_ids = columns[0]
    if len(set(sample_ids)) != len(sample_ids):
        raise ValueError("samples hold duplicate sample ids")
    of_sample = [_cluster_name(*row) for row in zip(*columns, strict=True)]
    ordered: list[str] = []
    sizes = []
    names = set(of_sample)
    for group in MODALITY_GROUPS:
        in_group = sorted(name for name in names if name.startswith(group + ":"))
        ordered += in_group
        sizes.append(len(in_group))
    position = {name: i for i, name in enumerate(ordered)}
    of_position = [position[c] for c in of_sample]
    index_of = dict(zip(sample_ids, of_position, strict=True))
    ids = samples["sample_id"]
    ids = ids.combine_chunks() if isinstance(ids, pa.ChunkedArray) else ids
    at = np.fromiter(of_position, dtype=np.int64, count=len(of_position))
    if not pa.types.is_string(ids.type):
        ids, at = None, None
    return Clusters(tuple(ordered), index_of, tuple(sizes), ids, at)


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


def replicate_weights_table(weights: np.ndarray) -> pa.Table:
    """`replicate_weights` as a REPLICATE_WEIGHTS table (counts fit 16 bits: a cluster is
    drawn at most as often as its group has clusters)."""
    counts = weights.astype(np.uint16)
    if not np.array_equal(counts, weights):
        raise ValueError("replicate weights are not counts below 65,536")
    replicates, clusters = counts.shape
    offsets = pa.array(np.arange(replicates + 1, dtype=np.int32) * clusters)
    column = pa.ListArray.from_arrays(offsets, pa.array(counts.ravel()))
    return pa.Table.from_arrays([column], schema=REPLICATE_WEIGHTS)


def weights_metadata(group_sizes: tuple[int, ...], seed: int) -> dict[bytes, bytes]:
    """What a REPLICATE_WEIGHTS file's schema metadata says it was drawn for."""
    return {b"group_sizes": ",".join(map(str, group_sizes)).encode(), b"seed": str(seed).encode()}


def weights_from_table(
    table: pa.Table, clusters: Clusters, replicates: int, seed: int
) -> np.ndarray:
    """The (replicates, clusters) float matrix of a REPLICATE_WEIGHTS table, checked against
    the benchmark's clusters and the settings (a stale file is an error, not other intervals)."""
    metadata = table.schema.metadata or {}
    drawn = (metadata.get(b"group_sizes", b"").decode(), metadata.get(b"seed", b"").decode())
    expected = tuple(v.decode() for v in weights_metadata(clusters.group_sizes, seed).values())
    if drawn != expected or table.num_rows != replicates:
        raise DataError(
            f"replicate weights drawn for group sizes, seed {drawn} and {table.num_rows} "
            f"replicates, but the run has {expected} and {replicates}: rerun the workflow",
            field="replicate weights",
        )
    counts = table["counts"].combine_chunks().flatten().to_numpy()
    return counts.reshape(replicates, len(clusters)).astype(np.float64)
