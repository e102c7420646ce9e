"""`dualcog.arrow_rows` builds what `pa.array(..., from_pandas=True)` builds, for every column
of the tables the jobs write from Python rows, and names the column and row of a misfit."""

from __future__ import annotations

import math
from unittest.mock import patch

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dualcog import arrow_rows, schemas
from dualcog.arrow_rows import RowValueError, column_array, table_from_rows


def values_of(type_: pa.DataType) -> st.SearchStrategy:
    """Plain Python values of `type_`, null (None, or NaN for floats) included."""
    if pa.types.is_string(type_):
        value: st.SearchStrategy = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
    elif pa.types.is_boolean(type_):
        value = st.booleans()
    elif pa.types.is_integer(type_):
        limit = 2 ** (type_.bit_width - 1)
        value = st.integers(-limit, limit - 1)
    elif pa.types.is_floating(type_):
        value = st.floats(allow_nan=True, allow_infinity=True) | st.integers(-(2**53), 2**53)
    elif pa.types.is_list(type_):
        value = st.lists(values_of(type_.value_type), max_size=4) | st.lists(
            values_of(type_.value_type), max_size=3
        ).map(tuple)
    elif pa.types.is_struct(type_):
        value = st.fixed_dictionaries({}, optional={f.name: values_of(f.type) for f in type_})
    else:
        raise AssertionError(f"no strategy for {type_}")
    return st.none() | value


def _same(built: pa.Array, expected: pa.Array) -> bool:
    built.validate(full=True)
    return built.equals(expected)


@pytest.mark.parametrize("leaves_by_arrow", [True, False], ids=["arrow-leaves", "buffer-leaves"])
@pytest.mark.parametrize(
    "field",
    [*schemas.RESPONSES, *schemas.PARSED],
    ids=lambda field: f"{field.name}:{field.type}",
)
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_a_column_equals_pa_array(field: pa.Field, leaves_by_arrow: bool, data: st.DataObject):
    values = data.draw(st.lists(values_of(field.type), max_size=12))
    expected = pa.array(values, type=field.type, from_pandas=True)
    # Both ways of building the leaf columns: Arrow's converter where it costs no pandas
    # import (a job whose pyarrow has no numpy), the buffer passes elsewhere.
    with patch.object(arrow_rows, "_converts_python_values_cheaply", lambda: leaves_by_arrow):
        assert _same(column_array(values, field.type, field.name), expected)


@pytest.mark.parametrize(
    ("values", "type_"),
    [
        ([2**53 + 1, 0.5], pa.float64()),  # Arrow refuses an inexact int: the buffers round it
        (["a", "\u00e9", None], pa.string()),
        ([2**31 - 1, None], pa.int32()),
    ],
)
def test_arrow_leaves_and_buffer_leaves_agree_where_arrow_refuses_or_accepts(
    values: list, type_: pa.DataType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(arrow_rows, "_converts_python_values_cheaply", lambda: False)
    by_buffers = column_array(values, type_)
    monkeypatch.setattr(arrow_rows, "_converts_python_values_cheaply", lambda: True)
    assert _same(column_array(values, type_), by_buffers)


def test_nan_is_null_at_every_depth() -> None:
    intervals = [[[0.0, math.nan]], None, [], [[1.0, 2.0], None]]
    built = column_array(intervals, schemas.INTERVALS)
    assert built.to_pylist() == [[[0.0, None]], None, [], [[1.0, 2.0], None]]
    assert built.null_count == 1


def test_rows_fill_absent_fields_with_nulls_and_ignore_others() -> None:
    table = table_from_rows([{"sample_id": "a", "extra": 1}, {}], schemas.RESPONSES)
    assert table.schema == schemas.RESPONSES
    assert table["sample_id"].to_pylist() == ["a", None]
    assert table["attempts"].null_count == 2


def test_an_empty_table_has_the_schema() -> None:
    assert table_from_rows([], schemas.PARSED).equals(schemas.PARSED.empty_table())


@pytest.mark.parametrize(
    ("values", "type_", "message"),
    [
        (["a", 3], pa.string(), r"column 'c', row 1: expected a string, got int 3"),
        ([1, True], pa.int64(), r"row 1: expected an integer \(int64\), got bool"),
        ([2**31], pa.int32(), r"row 0: expected an integer in range of int32"),
        ([1.5, "x"], pa.float64(), r"row 1: expected a number, got str"),
        ([None, 1], pa.bool_(), r"row 1: expected a bool"),
        ([[1.0], "ab"], schemas.BOX, r"row 1: expected a list, got str"),
        ([[0.5, "y"]], schemas.BOX, r"column 'c\[\]', row 1: expected a number"),
        ([{"option_id": 7}], schemas.ANSWER_ITEM, r"column 'c.option_id', row 0: expected a str"),
        (["\ud800"], pa.string(), r"column 'c', row 0: 'utf-8' codec can't encode"),
    ],
)
def test_a_misfit_names_its_column_and_row(values: list, type_: pa.DataType, message: str):
    with pytest.raises(RowValueError, match=message):
        column_array(values, type_, "c")
