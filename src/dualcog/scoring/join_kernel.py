"""Compiled join of parsed rows to samples on (sample_id, parse mode), over Arrow's string
buffers (numba).

Parsed rows usually come in the samples' order within each parse mode, with a few rows
absent. So each row is first compared with the sample after the one its mode matched last,
byte for byte; only when that fails is it looked up in a hash table of the sample ids. The
join is exact in any order; the order only decides how often the table is probed.

Strings are compared eight bytes at a time, through a view of each byte buffer as the
(overlapping, unaligned) 64-bit words starting at every byte; the compare is written out in
the kernel itself at each place, as a helper taking arrays measured several times slower.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numba
import numpy as np
import pyarrow as pa

_FNV_OFFSET = np.uint64(14695981039346656037)
_FNV_PRIME = np.uint64(1099511628211)
# The masked compare of a string's last partial word takes its first bytes as the low ones.
_LITTLE_ENDIAN = sys.byteorder == "little"


@dataclass(frozen=True)
class StringBuffers:
    """A string array as Arrow holds it: row i is `data[offsets[i]:offsets[i + 1]]`;
    `words[k]` is the eight bytes `data[k:k + 8]` as one integer (a view, no copy)."""

    offsets: np.ndarray  # int32 (string) or int64 (large_string), one more than rows
    data: np.ndarray  # uint8
    words: np.ndarray  # uint64, len(data) - 7 entries
    valid: np.ndarray  # bool per row; empty when no row is null

    @classmethod
    def of(cls, array: pa.Array) -> StringBuffers:
        if array.type not in (pa.string(), pa.large_string()):
            array = array.cast(pa.string())
        n = len(array)
        _, offset_buffer, data = array.buffers()
        width = np.int32 if array.type == pa.string() else np.int64
        offsets = np.frombuffer(offset_buffer, width, n + 1, width().itemsize * array.offset)
        data = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
        # Padded when short: numba types a view of at most one word as contiguous, which
        # would be one more kernel signature to compile.
        if len(data) < 16:
            data = np.concatenate([data, np.zeros(16 - len(data), np.uint8)])
        words = np.ndarray((len(data) - 7,), np.uint64, data, 0, (1,))
        if array.null_count:
            valid = np.asarray(array.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        else:
            valid = np.empty(0, bool)
        return cls(offsets, data, words, valid)


@dataclass(frozen=True)
class Join:
    """`lookup[mode * n_samples + sample]`: the parsed row of that sample and mode, or -1
    (mode-major: rows of one mode, in sample order, write one stretch of it)."""

    lookup: np.ndarray  # int32
    duplicate_sample: bool  # two samples share a sample_id
    several: bool  # two parsed rows share a known (sample, mode)
    unmatched: np.ndarray  # parsed rows whose sample_id or mode is not known


def join_parsed(
    sample_ids: pa.Array, parsed_ids: pa.Array, parsed_modes: pa.Array, modes: tuple[str, ...]
) -> Join:
    """Join parsed rows (sample_id, parse) to the samples' positions and `modes`' positions."""
    if max(len(sample_ids), len(parsed_ids)) >= 2**31:
        raise ValueError("the join keeps row positions as 32-bit integers")
    samples = StringBuffers.of(sample_ids)
    parsed = StringBuffers.of(parsed_ids)
    parse = StringBuffers.of(parsed_modes)
    names = StringBuffers.of(pa.array(list(modes), pa.string()))
    lookup, duplicate, several, matched = _join(
        samples.offsets, samples.data, samples.words, samples.valid,
        parsed.offsets, parsed.data, parsed.words, parsed.valid,
        parse.offsets, parse.data, parse.words, parse.valid,
        names.offsets, names.data, names.words, _LITTLE_ENDIAN,
    )  # fmt: skip
    return Join(lookup, bool(duplicate), bool(several), np.flatnonzero(~matched))


@numba.njit(cache=True)
def _join(
    s_off, s_data, s_words, s_valid,
    p_off, p_data, p_words, p_valid,
    m_off, m_data, m_words, m_valid,
    name_off, name_data, name_words, little_endian,
):  # fmt: skip
    n = len(s_off) - 1
    n_modes = len(name_off) - 1
    rows = len(p_off) - 1
    all_s, all_p, all_m = len(s_valid) == 0, len(p_valid) == 0, len(m_valid) == 0

    # Open-addressing table of the sample ids (FNV-1a hashes, linear probing).
    size = 1
    while size < 2 * n:
        size *= 2
    mask = np.uint64(size - 1)
    table = np.full(size, -1, np.int32)  # positions: half the memory of int64
    duplicate = False
    for i in range(n):
        if not (all_s or s_valid[i]):
            duplicate = True  # a null id can be told from no other null id
            continue
        a, b = s_off[i], s_off[i + 1]
        h = _FNV_OFFSET
        for k in range(a, b):
            h = (h ^ np.uint64(s_data[k])) * _FNV_PRIME
        slot = h & mask
        while True:
            j = table[slot]
            if j < 0:
                table[slot] = i
                break
            # same = ids i and j are equal (bytes a:b against c:d)
            c, d = s_off[j], s_off[j + 1]
            same = d - c == b - a
            k = 0
            while same and k + 8 <= b - a:
                same = s_words[c + k] == s_words[a + k]
                k += 8
            if same and k < b - a:
                if little_endian and c + k < len(s_words) and a + k < len(s_words):
                    low = (np.uint64(1) << np.uint64(8 * (b - a - k))) - np.uint64(1)
                    same = ((s_words[c + k] ^ s_words[a + k]) & low) == 0
                else:
                    while same and k < b - a:
                        same = s_data[c + k] == s_data[a + k]
                        k += 1
            if same:
                duplicate = True
                break
            slot = (slot + np.uint64(1)) & mask

    lookup = np.full(n * n_modes, -1, np.int32)
    matched = np.zeros(rows, np.bool_)
    expected = np.zeros(n_modes, np.int64)  # per mode: the sample after its last match
    several = False
    previous_mode = -1
    for r in range(rows):
        if not ((all_p or p_valid[r]) and (all_m or m_valid[r])):
            previous_mode = -1
            continue
        # The row's mode: the previous row's when the values are equal, else the name its
        # parse value equals (rows come in long runs of one mode).
        a, b = m_off[r], m_off[r + 1]
        c, d = m_off[r - 1] if r else 0, m_off[r] if r else 0
        same = previous_mode >= 0 and d - c == b - a  # the previous row had a mode
        k = 0
        while same and k + 8 <= b - a:
            same = m_words[c + k] == m_words[a + k]
            k += 8
        if same and k < b - a:
            if little_endian and a + k < len(m_words):
                low = (np.uint64(1) << np.uint64(8 * (b - a - k))) - np.uint64(1)
                same = ((m_words[c + k] ^ m_words[a + k]) & low) == 0
            else:
                while same and k < b - a:
                    same = m_data[c + k] == m_data[a + k]
                    k += 1
        mode = previous_mode if same else -1
        for q in range(0 if same else n_modes):
            c, d = name_off[q], name_off[q + 1]
            same = d - c == b - a
            k = 0
            while same and k + 8 <= b - a:
                same = name_words[c + k] == m_words[a + k]
                k += 8
            if same and k < b - a:
                if little_endian and c + k < len(name_words) and a + k < len(m_words):
                    low = (np.uint64(1) << np.uint64(8 * (b - a - k))) - np.uint64(1)
                    same = ((name_words[c + k] ^ m_words[a + k]) & low) == 0
                else:
                    while same and k < b - a:
                        same = name_data[c + k] == m_data[a + k]
                        k += 1
            if same:
                mode = q
                break
        previous_mode = mode
        if mode < 0:
            continue

        # The row's sample: first the one after its mode's last match, then the table's.
        a, b = p_off[r], p_off[r + 1]
        j = expected[mode]
        slot = np.uint64(0)
        probing = j >= n
        if probing:
            h = _FNV_OFFSET
            for k in range(a, b):
                h = (h ^ np.uint64(p_data[k])) * _FNV_PRIME
            slot = h & mask
            j = table[slot]
        found = -1
        while j >= 0:
            c, d = s_off[j], s_off[j + 1]
            same = (all_s or s_valid[j]) and d - c == b - a
            k = 0
            while same and k + 8 <= b - a:
                same = s_words[c + k] == p_words[a + k]
                k += 8
            if same and k < b - a:
                if little_endian and c + k < len(s_words) and a + k < len(p_words):
                    low = (np.uint64(1) << np.uint64(8 * (b - a - k))) - np.uint64(1)
                    same = ((s_words[c + k] ^ p_words[a + k]) & low) == 0
                else:
                    while same and k < b - a:
                        same = s_data[c + k] == p_data[a + k]
                        k += 1
            if same:
                found = j
                break
            if probing:
                slot = (slot + np.uint64(1)) & mask
            else:  # not the expected sample: look the id up
                probing = True
                h = _FNV_OFFSET
                for k in range(a, b):
                    h = (h ^ np.uint64(p_data[k])) * _FNV_PRIME
                slot = h & mask
            j = table[slot]
        if found < 0:
            continue
        matched[r] = True
        expected[mode] = found + 1
        key = mode * n + found
        if lookup[key] >= 0:
            several = True
        lookup[key] = r
    return lookup, duplicate, several, matched


@numba.njit(cache=True)
def expected_rows(lookup, task, kind_in_block, block_mode):
    """The rows to score, block by block, samples in order: (sample, block, parsed row, task)
    of every sample whose task kind `kind_in_block[block, kind]` scores in that block;
    `block_mode[block]` is the block's mode in `lookup` (mode-major, as `_join` returns)."""
    n = len(task)
    blocks = len(block_mode)
    total = 0
    for block in range(blocks):
        for s in range(n):
            total += kind_in_block[block, task[s]]
    sample = np.empty(total, np.int64)
    mode = np.empty(total, np.int64)
    parsed = np.empty(total, np.int64)
    row_task = np.empty(total, np.int64)
    i = 0
    for block in range(blocks):
        base = block_mode[block] * n
        for s in range(n):
            if kind_in_block[block, task[s]]:
                sample[i] = s
                mode[i] = block
                parsed[i] = lookup[base + s]
                row_task[i] = task[s]
                i += 1
    return sample, mode, parsed, row_task
