"""Arrow schema of per-sample score rows (one row per scored task, sample and parse mode)."""

from __future__ import annotations

import pyarrow as pa

# Null where a column does not apply to the row's task (e.g. `iou` on video rows).
SCORES = pa.schema(
    [
        ("sample_id", pa.string()),
        ("task", pa.string()),  # scored task id: behavior samples give two rows
        ("request_task", pa.string()),  # request kind the row was scored from
        ("parse", pa.string()),  # strict | compatible | legacy
        ("difficulty", pa.string()),
        ("responded", pa.bool_()),  # a response exists (stage != missing, row present)
        ("valid", pa.bool_()),  # every field of the response structurally valid (all_valid)
        # image tasks (docs/protocol.md §4)
        ("option_correct", pa.bool_()),
        ("iou", pa.float64()),
        ("bbox_hit", pa.bool_()),  # iou >= 0.5
        ("joint_correct", pa.bool_()),
        # behavior levels (docs/protocol.md §5)
        ("composite_mission", pa.bool_()),
        ("set_exact", pa.bool_()),  # predicted option set at this level == gold set
        ("composite_set_correct", pa.bool_()),  # composite rows of composite missions only
        ("label_tp", pa.int64()),
        ("label_fp", pa.int64()),
        ("label_fn", pa.int64()),
        # behavior levels and visibility: interval matching at tIoU >= 0.5 ...
        ("interval_tp", pa.int64()),
        ("interval_fp", pa.int64()),
        ("interval_fn", pa.int64()),
        # ... and at tIoU > 0: sum of each gold interval's matched tIoU, over its gold count
        ("tiou_sum", pa.float64()),
        ("n_gold_intervals", pa.int64()),
        ("sample_f1_50", pa.float64()),
        # visibility
        ("count_correct", pa.bool_()),
        # this row's side of a matched-context pair (docs/protocol.md §6)
        ("semantic_ok", pa.bool_()),
        ("evidence_ok", pa.bool_()),
    ]
)

# Matched-context pairs of the benchmark (docs/protocol.md §6), one row per pair.
PAIRS = pa.schema(
    [
        ("family", pa.string()),
        ("agent_sample_id", pa.string()),
        ("world_sample_id", pa.string()),
        ("stratum", pa.string()),
    ]
)
