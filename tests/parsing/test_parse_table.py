"""`parse_run` on Arrow tables, as the `parse` job runs it: counts, and NaN written as null."""

from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
from parse_corpus import BEHAVIOR_CASES, IMAGE_CASES, VISIBILITY_CASES

from dualcog.parsing import parse_run
from dualcog.schemas import PARSED, write_table
from dualcog.tasks import IMAGE_TASKS

OPTIONS = [{"option_id": o, "label": f"label {o}", "level": None} for o in "ABCDEF"]
EDGE_RAWS = {
    "landmark_position": [
        '{"answer_option_id":"A","bbox_xyxy_norm":[NaN,0.2,0.5,0.6]}',  # json reads NaN
        '{"answer_option_id":"B","bbox_xyxy_norm":[Infinity,0.2,0.5,0.6]}',
        "",
        None,  # no response row at all
    ],
    "landmark_visibility": ['{"visible_count":99999999999999999999,"visible_intervals_sec":[]}'],
}


def _run():
    cases = [("landmark_position", c.raw) for c in IMAGE_CASES]
    cases += [("behavior", c.raw) for c in BEHAVIOR_CASES]
    cases += [("landmark_visibility", c.raw) for c in VISIBILITY_CASES]
    cases += [(task, raw) for task, raws in EDGE_RAWS.items() for raw in raws]
    ids = [f"s{i:04d}" for i in range(len(cases))]
    samples = pa.table(
        {
            "sample_id": ids,
            "task": [task for task, _ in cases],
            "options": [OPTIONS] * len(ids),
        }
    )
    answered = [(sid, raw) for sid, (_, raw) in zip(ids, cases, strict=True) if raw is not None]
    responses = pa.table(
        {
            "sample_id": [sid for sid, _ in answered],
            "raw_text": [raw for _, raw in answered],
            "status": ["ok"] * (len(answered) - 1) + ["error"],
        }
    )
    return samples, responses


def test_parse_run_counts_and_nulls(tmp_path):
    samples, responses = _run()
    table, info = parse_run(samples, responses)
    assert table.schema.equals(PARSED)
    assert sum(info["stage_counts"]["compatible"].values()) == samples.num_rows
    # The audit table's counts: image samples per compatible-parse stage.
    rows = table.to_pylist()
    image = Counter(
        r["stage"] for r in rows if r["parse"] == "compatible" and r["task"] in IMAGE_TASKS
    )
    assert info["image_compatible_stages"] == dict(sorted(image.items()))
    assert sum(info["image_compatible_stages"].values()) < samples.num_rows  # no video
    write_table(table, PARSED, tmp_path / "parsed.parquet")
    # The NaN coordinate is a null, not a NaN.
    boxes = pq.read_table(tmp_path / "parsed.parquet").column("bbox").to_pylist()
    assert not any(v != v for box in boxes if box for v in box if v is not None)
