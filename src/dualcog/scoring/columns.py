"""Arrow column helpers for the scorers: flags, numbers, codes, and Arrow's buffers as the
compiled kernels read them."""

from __future__ import annotations

from dataclasses import dataclass

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


@dataclass(frozen=True)
class Bits:
    """A bitmap as Arrow holds it, for compiled kernels: row i's bit is bit `offset + i` of
    `data`, least significant bit first. For a validity bitmap an empty `data` means that
    no row is null. No buffer is copied, except to combine a flag with its validity."""

    data: np.ndarray  # uint8
    offset: int

    @classmethod
    def validity(cls, array: pa.Array) -> Bits:
        if array.null_count == 0:
            return cls(np.empty(0, np.uint8), 0)
        return cls(np.frombuffer(array.buffers()[0], np.uint8), array.offset)

    @classmethod
    def flag(cls, array: pa.Array | pa.ChunkedArray) -> Bits:
        """A boolean column, null as False."""
        array = single(array)
        if len(array) == 0:
            return cls(np.zeros(1, np.uint8), 0)
        if array.type != pa.bool_():
            array = array.cast(pa.bool_())
        size = (array.offset + len(array) + 7) // 8
        validity, values = array.buffers()[:2]
        bits = np.frombuffer(values, np.uint8, size)
        if array.null_count:
            bits = bits & np.frombuffer(validity, np.uint8, size)
        return cls(bits, array.offset)

    def kernel_args(self) -> tuple[np.ndarray, int]:
        return self.data, self.offset


@dataclass(frozen=True)
class ListBuffers:
    """A list column as Arrow lays it out, for compiled kernels: row i holds the items
    `offsets[i]:offsets[i + 1]` of `items` (the child array, whole) where `valid` holds.
    No buffer is copied."""

    offsets: np.ndarray  # int32 (list) or int64 (large_list), one more than rows
    valid: Bits
    items: pa.Array

    @classmethod
    def of(cls, array: pa.Array) -> ListBuffers:
        return cls(np.asarray(array.offsets.to_numpy()), Bits.validity(array), array.values)

    def float_items(self) -> np.ndarray:
        """The items as float64 (null items NaN)."""
        values = self.items.to_numpy(zero_copy_only=False)
        return values if values.dtype == np.float64 else values.astype(np.float64)

    def kernel_args(self, items: np.ndarray) -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
        """(offsets, validity bytes, validity bit offset, items) for a kernel."""
        return self.offsets, self.valid.data, self.valid.offset, items


def list_offsets(array: pa.Array) -> tuple[np.ndarray, pa.Array]:
    """A list column in place: offsets (row i's items are values[offsets[i]:offsets[i + 1]],
    none for a null row) and values. Arrow's own offsets unless a null row spans items."""
    offsets = array.offsets.to_numpy()
    if array.null_count:
        valid = np.asarray(array.is_valid().to_numpy(zero_copy_only=False))
        if (offsets[1:][~valid] != offsets[:-1][~valid]).any():
            start, length = list_layout(array)
            offsets = np.append(start, start[-1] + length[-1]).astype(offsets.dtype)
            return offsets, pc.list_flatten(array)
    return offsets, array.values


def interval_lists(intervals: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A list<list<double>> column in place: offsets of each row's intervals, offsets of each
    interval's numbers, and the numbers (null as NaN). A well-formed interval has two."""
    interval_offsets, inner = list_offsets(intervals)
    number_offsets, numbers = list_offsets(inner)
    return interval_offsets, number_offsets, floats(numbers)


def _one_byte_codes(array: pa.Array) -> np.ndarray | None:
    """Codes of a string array whose every value is one byte long: the byte; null -1."""
    if array.type != pa.string():
        return None
    n = len(array)
    _, offset_buffer, data = array.buffers()
    offsets = np.frombuffer(offset_buffer, np.int32, n + 1, 4 * array.offset) if n else None
    if offsets is None:
        return np.empty(0, np.int64)
    lengths = np.diff(offsets)
    if not array.null_count:
        if not (lengths == 1).all():
            return None
        return np.frombuffer(data, np.uint8, n, int(offsets[0])).astype(np.int64)  # in place
    valid = np.asarray(array.is_valid().to_numpy(zero_copy_only=False))
    if not (lengths[valid] == 1).all():
        return None
    if data is None or data.size == 0:
        return np.full(n, -1, np.int64)
    byte = np.frombuffer(data, np.uint8)
    out = byte[np.minimum(offsets[:-1], byte.size - 1)].astype(np.int64)
    out[~valid] = -1
    return out


def string_codes(*arrays: pa.Array | pa.ChunkedArray) -> list[np.ndarray]:
    """Integer codes of string arrays, equal across arrays iff the strings are; null is -1.

    One-byte values (option letters) are their own code; otherwise one dictionary encoding
    of all arrays together.
    """
    parts = [single(a) for a in arrays]
    parts = [a if a.type == pa.string() else a.cast(pa.string()) for a in parts]
    fast = [_one_byte_codes(a) for a in parts]
    if all(codes is not None for codes in fast):
        return fast  # type: ignore[return-value]
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
