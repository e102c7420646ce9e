"""Plain Python values -> typed Arrow arrays, without loading pandas.

`pa.array` on a Python list first asks whether the list is a pandas object, and that question
imports pandas (half a CPU second) the first time a process asks it. The jobs that write their
tables from Python rows (responses, parses) build the arrays here instead, from buffers; the
result equals `pa.array(values, type, from_pandas=True)` (a float NaN is a null), which
tests/test_arrow_rows.py checks for every column of the RESPONSES and PARSED schemas.

Only the types those schemas use are built: string, bool, int32, int64, float64, list, struct.
A column whose values all have the exact Python types of its Arrow type (`str`, `bool`, `int`,
`float`, `list` / `tuple`, `dict`, or None) is built in whole-column passes (`_fast_array`);
any other column, and one that does not fit (a surrogate, an integer out of range), takes the
value-by-value path, which names the misfit. Both give the same array. Where the question
costs nothing (pyarrow imported without numpy, as in the parse and replay jobs, never asks
it), the whole-column pass hands its leaf columns of exact types to `pa.array` itself.
"""

from __future__ import annotations

import math
import sys
from array import array
from collections.abc import Mapping, Sequence
from itertools import accumulate, chain
from typing import Any

import pyarrow as pa

_INT_CODES = {32: "i", 64: "q"}  # array module codes of the signed integer widths built
_OFFSET_MAX = 2**31 - 1  # list / string offsets are int32


class RowValueError(ValueError):
    """A value that does not fit its Arrow column; the message names the column and row.

    In a nested column (`bbox[]`, `answers[].option_id`) the row counts the column's values
    flattened across rows."""


def _bad(column: str, row: int, expected: str, value: Any) -> RowValueError:
    return RowValueError(
        f"column {column!r}, row {row}: expected {expected}, got {type(value).__name__} "
        f"{value!r:.80}"
    )


def _bits(flags: Sequence[Any]) -> pa.Buffer:
    """A bitmap, least significant bit first: bit i set where flags[i] is true.

    Built as one Python integer (no numpy: jobs that never need it do not load it)."""
    digits = "".join(["1" if flag else "0" for flag in reversed(flags)])
    return pa.py_buffer(int(digits or "0", 2).to_bytes((len(flags) + 7) // 8, "little"))


def _validity(valid: list[bool]) -> pa.Buffer | None:
    """The validity bitmap (bit i set: row i is not null); None when no row is null."""
    return None if all(valid) else _bits(valid)


def _offsets(lengths: list[int], column: str) -> pa.Buffer:
    offsets = array("i", [0] * (len(lengths) + 1))
    total = 0
    for i, length in enumerate(lengths):
        total += length
        if total > _OFFSET_MAX:
            raise RowValueError(f"column {column!r}: more than 2**31 - 1 values or bytes")
        offsets[i + 1] = total
    return pa.py_buffer(offsets.tobytes())


def _is_null(value: Any, type_: pa.DataType) -> bool:
    if value is None:
        return True
    return pa.types.is_floating(type_) and isinstance(value, float) and math.isnan(value)


_NONE = type(None)


def _offsets_of(lengths: Any) -> pa.Buffer | None:
    """Offsets from lengths in one pass; None past the int32 range (the slow path raises)."""
    try:
        return pa.py_buffer(array("i", accumulate(lengths, initial=0)).tobytes())
    except OverflowError:
        return None


# The Python types each leaf Arrow type takes in whole-column passes (exact types: a bool is
# no int here, a str subclass no str).
_LEAF_TYPES = {
    pa.string(): frozenset({str, _NONE}),
    pa.bool_(): frozenset({bool, _NONE}),
    pa.int32(): frozenset({int, _NONE}),
    pa.int64(): frozenset({int, _NONE}),
    pa.float64(): frozenset({float, int, _NONE}),
}


def _converts_python_values_cheaply() -> bool:
    """Whether `pa.array` of a Python list costs no pandas import in this process: pyarrow
    asks "is it a pandas object?" only when it holds numpy (`pyarrow.lib.np`), and the
    question is free once pandas is loaded."""
    return getattr(pa.lib, "np", None) is None or "pandas" in sys.modules


def _leaf_by_arrow(values: Sequence[Any], type_: pa.DataType) -> pa.Array | None:
    """Leaf values of the exact Python types of `type_` converted by Arrow's own C++
    converter (several times faster than the buffer passes below, and the same array: a NaN
    is a null), or None where Arrow refuses a value (the buffer passes then decide)."""
    try:
        return pa.array(values, type_, from_pandas=True)
    except (ValueError, TypeError, OverflowError, pa.ArrowException):
        return None


def _fast_array(values: Sequence[Any], type_: pa.DataType) -> pa.Array | None:
    """`column_array` in whole-column passes, or None where the value-by-value path must decide
    (a value of another Python type, a surrogate, an integer out of range, an overflow)."""
    n = len(values)
    types = set(map(type, values))
    has_null = _NONE in types
    leaf_types = _LEAF_TYPES.get(type_)
    if leaf_types is not None and types <= leaf_types and _converts_python_values_cheaply():
        built = _leaf_by_arrow(values, type_)
        if built is not None:
            return built
    if pa.types.is_string(type_):
        if not types <= {str, _NONE}:
            return None
        texts = [v if v is not None else "" for v in values] if has_null else values
        joined = "".join(texts)
        if joined.isascii():  # a character is a byte
            data, lengths = joined.encode("ascii"), map(len, texts)
        else:
            try:
                encoded = [text.encode("utf-8") for text in texts]
            except UnicodeEncodeError:
                return None
            data, lengths = b"".join(encoded), map(len, encoded)
        offsets = _offsets_of(lengths)
        if offsets is None:
            return None
        validity = _bits([v is not None for v in values]) if has_null else None
        return pa.Array.from_buffers(type_, n, [validity, offsets, pa.py_buffer(data)])
    if pa.types.is_boolean(type_):
        if not types <= {bool, _NONE}:
            return None
        validity = _bits([v is not None for v in values]) if has_null else None
        return pa.Array.from_buffers(type_, n, [validity, _bits(values)])  # None: a 0 bit
    if pa.types.is_signed_integer(type_) and type_.bit_width in _INT_CODES:
        if not types <= {int, _NONE}:
            return None
        try:
            data = array(_INT_CODES[type_.bit_width], [v or 0 for v in values])
        except OverflowError:
            return None
        validity = _bits([v is not None for v in values]) if has_null else None
        return pa.Array.from_buffers(type_, n, [validity, pa.py_buffer(data.tobytes())])
    if pa.types.is_float64(type_):
        if not types <= {float, int, _NONE}:
            return None
        valid = [v is not None and v == v for v in values]  # NaN is null, as pandas has it
        try:
            floats = array("d", [v if ok else 0.0 for v, ok in zip(values, valid, strict=True)])
        except OverflowError:
            return None
        validity = None if all(valid) else _bits(valid)
        return pa.Array.from_buffers(type_, n, [validity, pa.py_buffer(floats.tobytes())])
    if pa.types.is_list(type_):
        if not types <= {list, tuple, _NONE}:
            return None
        items = list(chain.from_iterable(filter(None, values)))  # None and [] add no item
        child = column_array(items, type_.value_type)
        offsets = _offsets_of([0 if v is None else len(v) for v in values])
        if offsets is None:
            return None
        validity = _bits([v is not None for v in values]) if has_null else None
        return pa.Array.from_buffers(type_, n, [validity, offsets], children=[child])
    if pa.types.is_struct(type_):
        if not types <= {dict, _NONE}:
            return None
        children = [
            column_array([None if v is None else v.get(field.name) for v in values], field.type)
            for field in type_
        ]
        validity = _bits([v is not None for v in values]) if has_null else None
        return pa.Array.from_buffers(type_, n, [validity], children=children)
    return None


def column_array(values: Sequence[Any], type_: pa.DataType, column: str = "?") -> pa.Array:
    """`values` (None for null) as an Arrow array of `type_`; a misfit raises RowValueError."""
    try:
        fast = _fast_array(values, type_)
    except RowValueError:
        fast = None  # a misfit in a nested column: named below, with this column's name
    if fast is not None:
        return fast
    n = len(values)
    valid = [not _is_null(v, type_) for v in values]
    validity = _validity(valid)
    if pa.types.is_string(type_):
        encoded = []
        for i, value in enumerate(values):
            if value is None:
                encoded.append(b"")
            elif not isinstance(value, str):
                raise _bad(column, i, "a string", value)
            else:
                try:
                    encoded.append(value.encode("utf-8"))
                except UnicodeEncodeError as error:
                    raise RowValueError(f"column {column!r}, row {i}: {error}") from error
        offsets = _offsets([len(b) for b in encoded], column)
        return pa.Array.from_buffers(type_, n, [validity, offsets, pa.py_buffer(b"".join(encoded))])
    if pa.types.is_boolean(type_):
        for i, value in enumerate(values):
            if value is not None and not isinstance(value, bool):
                raise _bad(column, i, "a bool", value)
        return pa.Array.from_buffers(type_, n, [validity, _bits([v is True for v in values])])
    if pa.types.is_signed_integer(type_) and type_.bit_width in _INT_CODES:
        limit = 2 ** (type_.bit_width - 1)
        data = array(_INT_CODES[type_.bit_width], [0] * n)
        for i, value in enumerate(values):
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                raise _bad(column, i, f"an integer ({type_})", value)
            if not -limit <= value < limit:
                raise _bad(column, i, f"an integer in range of {type_}", value)
            data[i] = value
        return pa.Array.from_buffers(type_, n, [validity, pa.py_buffer(data.tobytes())])
    if pa.types.is_float64(type_):
        data = array("d", [0.0] * n)
        for i, (value, ok) in enumerate(zip(values, valid, strict=True)):
            if not ok:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise _bad(column, i, "a number", value)
            data[i] = value
        return pa.Array.from_buffers(type_, n, [validity, pa.py_buffer(data.tobytes())])
    if pa.types.is_list(type_):
        items: list[Any] = []
        lengths = []
        for i, value in enumerate(values):
            if value is None:
                lengths.append(0)
            elif not isinstance(value, (list, tuple)):
                raise _bad(column, i, "a list", value)
            else:
                items.extend(value)
                lengths.append(len(value))
        child = column_array(items, type_.value_type, f"{column}[]")
        offsets = _offsets(lengths, column)
        return pa.Array.from_buffers(type_, n, [validity, offsets], children=[child])
    if pa.types.is_struct(type_):
        for i, value in enumerate(values):
            if value is not None and not isinstance(value, Mapping):
                raise _bad(column, i, "a mapping", value)
        children = [
            column_array(
                [None if v is None else v.get(field.name) for v in values],
                field.type,
                f"{column}.{field.name}",
            )
            for field in type_
        ]
        return pa.Array.from_buffers(type_, n, [validity], children=children)
    raise TypeError(f"column {column!r}: no builder for Arrow type {type_}")


def table_from_columns(columns: Sequence[Sequence[Any]], schema: pa.Schema) -> pa.Table:
    """Columns of plain values, in schema order, as a table of `schema`."""
    arrays = [
        column_array(values, field.type, field.name)
        for field, values in zip(schema, columns, strict=True)
    ]
    return pa.Table.from_arrays(arrays, schema=schema)


def table_from_rows(rows: Sequence[Mapping[str, Any]], schema: pa.Schema) -> pa.Table:
    """Row mappings as a table of `schema`: a field a row lacks is null, other keys ignored."""
    return table_from_columns([[row.get(name) for row in rows] for name in schema.names], schema)


def rows_where(table: pa.Table, keep: Sequence[bool]) -> pa.Table:
    """The rows of `table` where `keep` is true, in order, cut out as slices: `Table.filter`
    would load pyarrow.compute (a twentieth of a CPU second) for what a job does once."""
    pieces = []
    start = None
    for i, flag in enumerate([*keep, False]):
        if flag and start is None:
            start = i
        elif not flag and start is not None:
            pieces.append(table.slice(start, i - start))
            start = None
    return pa.concat_tables(pieces) if pieces else table.slice(0, 0)
