"""Arrow column helpers for the vectorized scorers: flags, numbers, list flattening."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def single(array: pa.Array | pa.ChunkedArray) -> pa.Array:
    return array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array


def flags(array: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A boolean column as a numpy bool array, null as False."""
    return np.asarray(single(array).fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)


def floats(array: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A numeric column as float64, null as NaN."""
    return np.asarray(
        single(array).cast(pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64
    )


def parents(array: pa.Array) -> np.ndarray:
    """Row of each item of a list column (null lists contribute nothing)."""
    return np.asarray(pc.list_parent_indices(array).to_numpy(), dtype=np.int64)


def flatten(array: pa.Array) -> pa.Array:
    return single(pc.list_flatten(array))


def interval_pairs(intervals: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Items of a list<list<double>> column: (row, start, end, well formed).

    Well formed: exactly two numbers; a null or other-length item gives NaN start and end.
    """
    owner = parents(intervals)
    inner = flatten(intervals)
    lengths = np.asarray(pc.list_value_length(inner).fill_null(0).to_numpy(), dtype=np.int64)
    values = floats(flatten(inner))
    first = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
    pair = lengths == 2
    start = np.full(len(inner), np.nan)
    end = np.full(len(inner), np.nan)
    start[pair] = values[first[pair]]
    end[pair] = values[first[pair] + 1]
    return owner, start, end, pair


def codes(*arrays: pa.Array) -> list[np.ndarray]:
    """Integer codes of string arrays over one shared dictionary (null is a code too)."""
    joined = pa.chunked_array([single(a).cast(pa.string()) for a in arrays], type=pa.string())
    encoded = pc.dictionary_encode(joined.combine_chunks(), null_encoding="encode")
    indices = np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    out, at = [], 0
    for array in arrays:
        out.append(indices[at : at + len(array)])
        at += len(array)
    return out


def dictionary_size(*code_arrays: np.ndarray) -> int:
    return 1 + max((int(c.max()) for c in code_arrays if len(c)), default=0)
