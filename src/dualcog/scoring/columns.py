"""Arrow column helpers for the scorers: flags, numbers, codes, and list columns as their
flattened items (`list_layout`: each row's first item and count)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def single(array: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One array; a chunked array's only chunk is taken as it is (combine_chunks copies)."""
    if not isinstance(array, pa.ChunkedArray):
        return array
    return array.chunk(0) if array.num_chunks == 1 else array.combine_chunks()


def flags(array: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A boolean column as a numpy bool array, null as False."""
    return np.asarray(single(array).fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)


def bool_array(values: np.ndarray) -> pa.Array:
    """A numpy bool array as an Arrow boolean array without nulls (bits packed by numpy,
    many times faster than pa.array's conversion)."""
    bits = np.packbits(values, bitorder="little")
    return pa.Array.from_buffers(pa.bool_(), len(values), [None, pa.py_buffer(bits)])


def floats(array: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A numeric column as float64, null as NaN."""
    return np.asarray(
        single(array).cast(pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64
    )


def counts(array: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """An integer column as (int64 values, present); null rows hold 0 and are not present."""
    column = single(array).cast(pa.int64())
    present = flags(column.is_valid())
    values = pc.fill_null(column, 0).to_numpy(zero_copy_only=False)
    return np.asarray(values, dtype=np.int64), present


def list_layout(array: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Per row of a list column: where its items start in `pc.list_flatten(array)`, and how
    many."""
    offsets = np.asarray(array.offsets.to_numpy(), dtype=np.int64)
    length = np.diff(offsets)
    if array.null_count == 0:
        return offsets[:-1] - offsets[0], length
    length[~np.asarray(array.is_valid().to_numpy(zero_copy_only=False))] = 0  # list_flatten skips
    start = np.cumsum(length) - length
    return start, length


def flatten(array: pa.Array) -> pa.Array:
    """The items of a list column's non-null rows, one array (`list_layout` indexes it)."""
    return single(pc.list_flatten(array))


def interval_pairs(intervals: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Items of a list<list<double>> column: (row, start, end, well formed).

    Well formed: exactly two numbers; a null or other-length item gives NaN start and end.
    """
    _, count = list_layout(intervals)
    owner = np.repeat(np.arange(len(intervals)), count)
    inner = flatten(intervals)
    first, lengths = list_layout(inner)
    values = floats(flatten(inner))
    pair = lengths == 2
    if pair.all():
        return owner, values[first], values[first + 1], pair
    start = np.full(len(inner), np.nan)
    end = np.full(len(inner), np.nan)
    start[pair] = values[first[pair]]
    end[pair] = values[first[pair] + 1]
    return owner, start, end, pair


def string_codes(*arrays: pa.Array | pa.ChunkedArray) -> list[np.ndarray]:
    """Integer codes of string arrays, equal across arrays iff the strings are; null is -1.

    One dictionary encoding of all arrays together.
    """
    parts = [single(a) for a in arrays]
    parts = [a if a.type == pa.string() else a.cast(pa.string()) for a in parts]
    encoded = pc.dictionary_encode(pa.chunked_array(parts, type=pa.string()))
    return [
        np.asarray(chunk.indices.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)
        for chunk in _chunks_by_length(encoded, [len(a) for a in parts])
    ]


def _chunks_by_length(array: pa.ChunkedArray, lengths: list[int]) -> list[pa.Array]:
    out, at = [], 0
    for length in lengths:
        out.append(single(array.slice(at, length)))
        at += length
    return out


def codes(*arrays: pa.Array) -> list[np.ndarray]:
    """Non-negative integer codes of string arrays over one shared dictionary (null is a code
    too: 0)."""
    return [c + 1 for c in string_codes(*arrays)]


def take_rows(
    array: pa.Array | pa.ChunkedArray, positions: np.ndarray
) -> pa.Array | pa.ChunkedArray:
    """`array.take(positions)`; when the positions are a few runs of consecutive rows, those
    rows as zero-copy slices instead."""
    n = len(positions)
    breaks = np.flatnonzero(np.diff(positions) != 1) + 1 if n else np.empty(0, np.int64)
    if n == 0 or len(breaks) >= 64:
        return array.take(pa.array(positions))
    bounds = [0, *breaks.tolist(), n]
    pieces: list[pa.Array] = []
    for first, stop in zip(bounds[:-1], bounds[1:], strict=False):
        piece = array.slice(int(positions[first]), stop - first)
        pieces.extend(piece.chunks if isinstance(piece, pa.ChunkedArray) else [piece])
    return pa.chunked_array(pieces, type=array.type)


def at_rows(values: np.ndarray, at: np.ndarray, absent: object) -> np.ndarray:
    """`values[at]`, with `absent` where `at` is -1."""
    return np.append(values, np.asarray([absent], dtype=values.dtype))[at]


def dictionary_size(*code_arrays: np.ndarray) -> int:
    return 1 + max((int(c.max()) for c in code_arrays if len(c)), default=0)


def encoded(array: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, list]:
    """A column as dictionary codes (int64, -1 for null) and the dictionary's values, in
    order of first appearance."""
    dictionary = pc.dictionary_encode(single(array))
    codes = dictionary.indices.fill_null(-1).to_numpy(zero_copy_only=False)
    return np.asarray(codes, dtype=np.int64), dictionary.dictionary.to_pylist()


def first_seen(codes: np.ndarray) -> np.ndarray:
    """The distinct codes in order of first appearance (as `pandas.unique`)."""
    _, first = np.unique(codes, return_index=True)
    return codes[np.sort(first)]


def kahan_sums(values: np.ndarray, group: np.ndarray, n_groups: int) -> np.ndarray:
    """Per group, the compensated (Kahan) sum of its non-NaN values, in row order.

    This is the sum a pandas group-by computes (its `group_sum`), to the last bit: metrics
    that were pandas sums keep their exact values. `np.bincount` adds without compensation
    and may differ in the last bits.
    """
    keep = ~np.isnan(values)
    total = [0.0] * n_groups
    error = [0.0] * n_groups
    for value, at in zip(values[keep].tolist(), group[keep].tolist(), strict=True):
        y = value - error[at]
        t = total[at] + y
        compensation = t - total[at] - y
        error[at] = 0.0 if compensation != compensation else compensation  # inf - inf
        total[at] = t
    return np.array(total, dtype=np.float64)


def dense_groups(combined: np.ndarray, space: int) -> tuple[np.ndarray, np.ndarray]:
    """`np.unique(combined, return_inverse=True)` for codes in [0, space), without sorting:
    the distinct codes ascending, and each value's position among them."""
    seen = np.zeros(space, bool)
    seen[combined] = True
    found = np.flatnonzero(seen)
    position = np.full(space, -1, np.int64)
    position[found] = np.arange(len(found))
    return found, position[combined]
