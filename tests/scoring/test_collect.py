"""Collecting per-model artifacts with Arrow only: same rows and order as pandas, no pandas."""

import subprocess
import sys

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dualcog.collect import METRIC_KEY, collect_metrics, concat_artifacts, repeats_previous_key
from dualcog.schemas import METRICS


def metrics_table(rows):
    return pa.Table.from_pylist(
        [dict(zip(METRICS.names, row, strict=True)) for row in rows], schema=METRICS
    )


ROWS = [
    ("m2", "self_position", "strict", "all", "option_acc", 0.5, 4),
    ("m1", "self_position", "strict", "hard", "option_acc", None, 0),
    ("m1", "behavior", "compatible", "all", "mean_tiou", 0.25, 3),
    ("m1", "self_position", "strict", "all", "option_acc", 1.0, 4),
    ("m1", "Self_position", "strict", "all", "option_acc", 0.0, 1),  # upper case sorts first
    ("m1", "behavior", "compatible", None, "mean_tiou", 0.75, 2),  # null stratum sorts last
]


def test_sorted_like_pandas_stable_sort():
    table = metrics_table(ROWS)
    expected = table.to_pandas().sort_values(METRIC_KEY, kind="stable", na_position="last")
    got = collect_metrics(table).to_pandas()
    pd.testing.assert_frame_equal(got, expected.reset_index(drop=True))


def test_repeated_key_is_an_error_naming_the_row():
    with pytest.raises(ValueError, match="duplicate metric rows.*'m1'.*'mean_tiou'"):
        collect_metrics(metrics_table(ROWS + [ROWS[2]]))
    # Null key fields are equal to each other, as for pandas' `duplicated`.
    with pytest.raises(ValueError, match="duplicate metric rows"):
        collect_metrics(metrics_table(ROWS + [ROWS[5]]))


def test_repeats_previous_key_edges():
    assert not repeats_previous_key(metrics_table([]), METRIC_KEY)
    assert not repeats_previous_key(metrics_table(ROWS[:1]), METRIC_KEY)
    one_null = [ROWS[2], ROWS[5]]  # same but for a null stratum on one side
    assert not repeats_previous_key(metrics_table(one_null), METRIC_KEY)


def test_concat_keeps_file_order(tmp_path):
    paths = []
    for i, chunk in enumerate((ROWS[:2], ROWS[2:])):
        paths.append(tmp_path / f"{i}.parquet")
        pq.write_table(metrics_table(chunk), paths[-1])
    assert concat_artifacts(paths).equals(metrics_table(ROWS))


def test_collecting_imports_no_pandas(tmp_path):
    path = tmp_path / "m.parquet"
    pq.write_table(metrics_table(ROWS), path)
    code = (
        "import sys; from dualcog.collect import collect_metrics, concat_artifacts; "
        f"collect_metrics(concat_artifacts([{str(path)!r}])); "
        "import dualcog.stamp, dualcog.stats.schema; "
        "assert 'pandas' not in sys.modules, 'pandas imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
