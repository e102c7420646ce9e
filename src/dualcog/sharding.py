"""Sharded inference: one (model, request kind) split into N jobs that a cluster spreads.

Shard `i` of `n` (1-based) holds a contiguous block of the prompts, in prompt order, the
blocks differing in size by at most one. Each shard is an ordinary
`dualcog.inference.run_model` call over its block (`scripts/infer.py`); the response cache is
shared by all shards of a (model, task) and keyed per request, so the assembled result does
not depend on the shard count and changing the count sends nothing that is already cached.
A model's rate limits and concurrency stay the model's: its shards draw from the model's one
request budget (`dualcog.inference.budget`; across machines see docs/cluster.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dualcog.errors import DualCogError

if TYPE_CHECKING:  # the Snakefile imports `shard_count` from here: pyarrow only where used
    import pyarrow as pa


class ShardError(DualCogError):
    """Shard outputs that do not add up to the prompts they were cut from."""


def shard_count(model: Mapping[str, Any]) -> int:
    return int(model.get("shards", 1))


def shard_bounds(total: int, shard: int, shards: int) -> tuple[int, int]:
    """[start, stop) of shard `shard` (1-based) of `shards` over `total` rows."""
    if shards < 1 or not 1 <= shard <= shards:
        raise ValueError(f"shard {shard} of {shards}: need 1 <= shard <= shards")
    base, extra = divmod(total, shards)
    start = (shard - 1) * base + min(shard - 1, extra)
    return start, start + base + (1 if shard <= extra else 0)


def select_shard(prompts: pa.Table, shard: int, shards: int) -> pa.Table:
    start, stop = shard_bounds(len(prompts), shard, shards)
    return prompts.slice(start, stop - start)


def shard_label(task: str, shard: int, shards: int) -> str:
    """`<task>.shard<i>of<n>`: names a shard's responses file, log and job outcome."""
    return f"{task}.shard{shard}of{shards}"


def job_labels(model: Mapping[str, Any], task: str) -> list[str]:
    """The labels of the inference jobs of one (model, task): the task, or its shards."""
    count = shard_count(model)
    if count == 1:
        return [task]
    return [shard_label(task, shard, count) for shard in range(1, count + 1)]


def assemble_shards(
    prompt_ids: Sequence[str], shards: Sequence[pa.Table], sources: Sequence[str]
) -> pa.Table:
    """The shards' rows as one table in prompt order; every prompt exactly once."""
    import pyarrow as pa

    table = pa.concat_tables(shards)
    ids = table.column("sample_id").to_pylist()
    source_of = [name for name, part in zip(sources, shards, strict=True) for _ in range(len(part))]
    position: dict[str, int] = {}
    for index, sample_id in enumerate(ids):
        if sample_id in position:
            raise ShardError(
                f"sample {sample_id!r} is answered twice: in {source_of[position[sample_id]]} "
                f"and {source_of[index]}"
            )
        position[sample_id] = index
    missing = [sample_id for sample_id in prompt_ids if sample_id not in position]
    if missing:
        raise ShardError(
            f"{len(missing)} prompts have no response in the shards {', '.join(sources)} "
            f"(e.g. sample {missing[0]!r}); rerun their infer_shard jobs"
        )
    if len(ids) != len(prompt_ids):
        extra = sorted(set(ids) - set(prompt_ids))
        raise ShardError(
            f"the shards hold responses to {len(extra)} samples that are not in the prompts "
            f"(e.g. {extra[0]!r}); they were cut from other prompts: rerun infer_shard"
        )
    return table.take(pa.array([position[sample_id] for sample_id in prompt_ids]))
