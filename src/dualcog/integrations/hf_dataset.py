"""The benchmark as a `datasets`-loadable folder (docs/hf-dataset.md).

`data/<task>.parquet` per request kind, holding the ingested SAMPLES rows (every field the
tasks use: prompts, options, gold answers, media, pairing keys), and a `README.md` dataset
card whose YAML `configs:` declares one split per task (split names are the task ids, valid
`datasets` split names) and pins the source: the release's repo and commit and the
manifests' digest. Media are paths relative to the data root, or their bytes when asked
(`embed_media`). Written with pyarrow and yaml only: `datasets` is needed to read it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from dualcog import atomic
from dualcog.errors import DataError
from dualcog.stamp import stamp_digest
from dualcog.tasks import REQUEST_KINDS

SPLIT_NAME = re.compile(r"^\w+(\.\w+)*$")  # what `datasets` accepts as a split name

MEDIA_ITEM = pa.struct([("role", pa.string()), ("path", pa.string()), ("bytes", pa.binary())])


def _relative(resolved: str, root: Path, sample_id: str) -> str:
    path = Path(resolved)
    path = (path if path.is_absolute() else root / path).resolve()
    if not path.is_relative_to(root):
        raise DataError(
            f"media {resolved} lies outside the data root {root}: no relative path to write",
            sample=sample_id,
            field="media",
        )
    return path.relative_to(root).as_posix()


def dataset_table(samples: pa.Table, data_root: str | Path, embed_media: bool) -> pa.Table:
    """SAMPLES rows with `media` as (role, path relative to `data_root`, bytes or null) and
    without machine-specific columns (the absolute manifest path becomes relative too)."""
    root = Path(data_root).resolve()
    rows = samples.to_pylist()
    media = []
    manifests = []
    for row in rows:
        items = []
        for item in row["media"] or []:
            relative = _relative(item["resolved_path"], root, row["sample_id"])
            data = Path(item["resolved_path"]).read_bytes() if embed_media else None
            items.append({"role": item["role"], "path": relative, "bytes": data})
        media.append(items)
        manifests.append(_relative(row["manifest_path"], root, row["sample_id"]))
    table = samples.set_column(
        samples.schema.get_field_index("media"), "media", pa.array(media, pa.list_(MEDIA_ITEM))
    )
    return table.set_column(
        table.schema.get_field_index("manifest_path"), "manifest_path", pa.array(manifests)
    )


def dataset_card(splits: Mapping[str, int], source: Mapping[str, Any], embed_media: bool) -> str:
    """README.md: YAML front matter (`configs:` with one split per task, `dataset_info`
    counts, the pinned source) and a short text saying how to load it."""
    for name in splits:
        if not SPLIT_NAME.match(name):
            raise DataError(f"{name!r} is not a valid split name for `datasets`")
    meta = {
        "pretty_name": "UAV-DualCog (ingested by dualcog)",
        "configs": [
            {
                "config_name": "default",
                "data_files": [{"split": name, "path": f"data/{name}.parquet"} for name in splits],
            }
        ],
        "dataset_info": {
            "splits": [{"name": name, "num_examples": count} for name, count in splits.items()]
        },
        "source": dict(source),
    }
    media = (
        "bytes embedded in `media[].bytes`"
        if embed_media
        else "paths relative to the data root in `media[].path` (bytes not embedded)"
    )
    lines = [
        "---",
        yaml.safe_dump(meta, sort_keys=False).rstrip(),
        "---",
        "",
        "# UAV-DualCog, as ingested by dualcog",
        "",
        "One split per request kind, each row an ingested sample with every field the tasks "
        f"read; media: {media}.",
        "",
        "```python",
        "from datasets import load_dataset",
        "",
        'benchmark = load_dataset("path/to/this/folder")',
        "print(benchmark)",
        "```",
        "",
        f"Source: `{json.dumps(dict(source), sort_keys=True)}`.",
        "",
    ]
    return "\n".join(lines)


def write_dataset(
    folder: str | Path,
    samples: pa.Table,
    data_root: str | Path,
    stamp: Mapping[str, Any],
    repo: str,
    embed_media: bool = False,
) -> dict[str, int]:
    """Write the folder; returns the sample count of each split."""
    folder = Path(folder)
    table = dataset_table(samples, data_root, embed_media)
    tasks = table.column("task").to_pylist()
    splits: dict[str, int] = {}
    for kind in REQUEST_KINDS:
        at = [i for i, task in enumerate(tasks) if task == kind.task]
        if not at:
            continue
        part = table.take(pa.array(at, pa.int64()))
        atomic.write_with(
            folder / "data" / f"{kind.task}.parquet", lambda p, t=part: pq.write_table(t, p)
        )
        splits[kind.task] = len(at)
    release = stamp.get("release") or {}
    source = {
        "repo": release.get("repo") or repo,
        "revision": release.get("commit")
        or release.get("revision")
        or "unpinned (local data root)",
        "manifests_digest": stamp.get("data", {}).get("digest"),
        "dualcog_stamp_digest": stamp_digest(stamp),
        "protocol_revision": stamp.get("protocol_revision"),
    }
    atomic.write_text(folder / "README.md", dataset_card(splits, source, embed_media))
    return splits
