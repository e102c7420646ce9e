"""The sample join of `score_samples` (`score._parsed_positions`) against a dict join, on
random cases: any row order, unknown, null and repeated ids, ids of many lengths sharing
prefixes, multi-byte characters, arrays sliced from larger buffers."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dualcog.scoring.score import _parsed_positions

MODES = ("strict", "compatible", "legacy")

# Ids sharing prefixes, with multi-byte characters.
ID = st.text(alphabet="ab7é", min_size=0, max_size=19)


def plain_join(sample_ids, parsed_ids, parsed_modes, modes):
    """(lookup at sample * len(modes) + mode, duplicate sample id, several rows of a key)."""
    position = {}
    duplicate = False
    for i, sample_id in enumerate(sample_ids):
        if sample_id is None or sample_id in position:
            duplicate = True
        else:
            position[sample_id] = i
    lookup, several, unmatched = {}, False, []
    for r, (sample_id, mode) in enumerate(zip(parsed_ids, parsed_modes, strict=True)):
        if sample_id not in position or mode not in modes:
            # Compared as strings; a null on either side makes a null key.
            unmatched.append(None if sample_id is None or mode is None else (sample_id, mode))
            continue
        key = position[sample_id] * len(modes) + modes.index(mode)
        several |= key in lookup
        lookup[key] = r
    several |= len(set(unmatched)) < len(unmatched)
    table = np.full(len(sample_ids) * len(modes), -1, np.int64)
    for key, r in lookup.items():
        table[key] = r
    return table, duplicate, several


@st.composite
def join_case(draw):
    sample_ids = draw(st.lists(ID, max_size=30, unique=True))
    if draw(st.booleans()) and sample_ids:  # a duplicate or null sample id, sometimes
        sample_ids.append(draw(st.sampled_from([*sample_ids, None])))
    rows = []
    for mode in MODES:  # the usual order: per mode, samples in order with gaps
        rows += [(s, mode) for s in sample_ids if draw(st.integers(0, 9)) > 1]
    rows += draw(
        st.lists(st.tuples(st.one_of(ID, st.none()), st.sampled_from([*MODES, "x", None])))
    )
    if draw(st.booleans()):
        rows = draw(st.permutations(rows))
    return sample_ids, rows


def _tables(sample_ids, rows, sliced):
    columns = [sample_ids, [r[0] for r in rows], [r[1] for r in rows]]
    arrays = [pa.array(values, pa.string()) for values in columns]
    if sliced:  # arrays that start at a non-zero offset into their buffers
        arrays = [pa.concat_arrays([pa.array(["pad"]), a]).slice(1) for a in arrays]
    samples = pa.table({"sample_id": arrays[0]})
    parsed = pa.table({"sample_id": arrays[1], "parse": arrays[2]})
    return samples, parsed, columns


@settings(max_examples=300, deadline=None)
@given(join_case(), st.booleans())
def test_join_equals_a_dict_join(case, sliced) -> None:
    samples, parsed, columns = _tables(*case, sliced)
    lookup, duplicate, several = plain_join(*columns, MODES)
    if duplicate:
        with pytest.raises(ValueError, match="duplicate sample ids"):
            _parsed_positions(samples, parsed, MODES)
    elif several:
        with pytest.raises(ValueError, match="several rows"):
            _parsed_positions(samples, parsed, MODES)
    else:
        assert _parsed_positions(samples, parsed, MODES).tolist() == lookup.tolist()


def test_join_in_order_with_gaps_and_out_of_order() -> None:
    sample_ids = [f"sample-{k:05d}" for k in range(50)]
    rows = [(s, m) for m in MODES for k, s in enumerate(sample_ids) if k % 7]
    rows.insert(10, (sample_ids[14], "legacy"))  # one row out of its place (k % 7 == 0: absent)
    samples, parsed, columns = _tables(sample_ids, rows, False)
    lookup, duplicate, several = plain_join(*columns, MODES)
    assert not (duplicate or several)
    assert _parsed_positions(samples, parsed, MODES).tolist() == lookup.tolist()
