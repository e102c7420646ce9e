"""The compiled scoring kernels against plain Python versions of their rules, on random cases.

The join (`join_kernel`) against a dict join, in any row order, with unknown, null and
repeated ids, ids of every length around the 8-byte words it compares, sliced and large
string arrays, and its byte-by-byte path. The image rule (`box_kernel`, through
`score_tables`) against the rule written out per row: options in every parse mode,
Future Observation candidates, released legacy boxes, and boxes that are null, short,
reversed, degenerate, NaN or infinite; on tables whose arrays start at a non-zero offset too.
"""

from __future__ import annotations

import math
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dualcog.schemas import PARSED, SAMPLES
from dualcog.scoring import join_kernel, score_tables
from dualcog.scoring.columns import Bits, ListBuffers
from dualcog.scoring.join_kernel import join_parsed
from dualcog.tasks import PARSE_MODES

MODES = ("strict", "compatible", "legacy")

# -- the join --------------------------------------------------------------------------------

# Ids around the word size, sharing prefixes, with multi-byte characters.
ID = st.text(alphabet="ab7é", min_size=0, max_size=19)


def plain_join(sample_ids, parsed_ids, parsed_modes, modes):
    position = {}
    duplicate = False
    for i, sample_id in enumerate(sample_ids):
        if sample_id is None or sample_id in position:
            duplicate = True
        else:
            position[sample_id] = i
    n, lookup, several, unmatched = len(sample_ids), {}, False, []
    for r, (sample_id, mode) in enumerate(zip(parsed_ids, parsed_modes, strict=True)):
        if sample_id not in position or mode not in modes:
            unmatched.append(r)
            continue
        key = modes.index(mode) * n + position[sample_id]
        several |= key in lookup
        lookup[key] = r
    table = np.full(n * len(modes), -1, np.int64)
    for key, r in lookup.items():
        table[key] = r
    return table, duplicate, several, unmatched


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


def _join_both(sample_ids, rows, string_type=None, sliced=False):
    string_type = string_type or pa.string()
    parsed_ids = [r[0] for r in rows]
    parsed_modes = [r[1] for r in rows]
    arrays = [pa.array(values, string_type) for values in (sample_ids, parsed_ids, parsed_modes)]
    if sliced:  # arrays that start at a non-zero offset into their buffers
        arrays = [pa.concat_arrays([pa.array(["pad"], string_type), a]).slice(1) for a in arrays]
    got = join_parsed(*arrays, MODES)
    want = plain_join(sample_ids, parsed_ids, parsed_modes, MODES)
    return got, want


@settings(max_examples=300, deadline=None)
@given(join_case(), st.sampled_from([pa.string(), pa.large_string()]), st.booleans())
def test_join_equals_a_dict_join(case, string_type, sliced) -> None:
    got, (lookup, duplicate, several, unmatched) = _join_both(*case, string_type, sliced)
    assert got.duplicate_sample == duplicate
    if duplicate:
        return  # score_tables refuses the samples; the lookup is not used
    assert got.several == several
    assert got.unmatched.tolist() == unmatched
    if not several:
        assert got.lookup.tolist() == lookup.tolist()


@settings(max_examples=100, deadline=None)
@given(join_case())
def test_join_compares_bytes_alike_without_the_masked_word(case) -> None:
    """Big-endian machines compare a string's last partial word byte by byte."""
    little = _join_both(*case)[0]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(join_kernel, "_LITTLE_ENDIAN", False)
        big = _join_both(*case)[0]
    assert (big.duplicate_sample, big.several) == (little.duplicate_sample, little.several)
    assert big.lookup.tolist() == little.lookup.tolist()
    assert big.unmatched.tolist() == little.unmatched.tolist()


def test_join_in_order_with_gaps_and_out_of_order() -> None:
    samples = [f"sample-{k:05d}" for k in range(50)]
    rows = [(s, m) for m in MODES for k, s in enumerate(samples) if k % 7]
    rows.insert(10, (samples[14], "legacy"))  # one row out of its place (k % 7 == 0: absent)
    got, want = _join_both(samples, rows)
    assert got.lookup.tolist() == want[0].tolist() and not got.several


def test_bits_read_flags_and_validity_at_any_offset() -> None:
    values = [True, None, False, True, True, None, False, True, True, True, False]
    array = pa.array(values).slice(3)
    bits = Bits.flag(array)
    got = [(bits.data[(bits.offset + i) >> 3] >> ((bits.offset + i) & 7)) & 1 for i in range(8)]
    assert got == [1 if v else 0 for v in values[3:]]
    lists = pa.array([[1.0], None, [2.0, 3.0], None, []]).slice(1)
    layout = ListBuffers.of(lists)
    valid = layout.valid
    assert [(valid.data[(valid.offset + i) >> 3] >> ((valid.offset + i) & 7)) & 1
            for i in range(4)] == [0, 1, 0, 1]  # fmt: skip
    items = layout.float_items()
    assert items[layout.offsets[1] : layout.offsets[2]].tolist() == [2.0, 3.0]


# -- the image rule ----------------------------------------------------------------------------

FO = "future_observation"
GRID = [0.0, 0.2, 0.3, 0.5, 0.9]  # coarse: boxes overlap often, and IoU values repeat
ODD = [math.nan, math.inf, -math.inf, 1.5, -0.2]


def _box(rng: random.Random) -> list | None:
    """Mostly usable boxes, then what the rule turns to 0: degenerate or reversed,
    non-finite, not four numbers, null."""
    x1, x2 = sorted(rng.sample(GRID, 2))
    y1, y2 = sorted(rng.sample(GRID, 2))
    roll = rng.random()
    if roll < 0.7:
        return [x1, y1, x2, y2]
    if roll < 0.75:
        return [x2, y1, x1, y2]  # reversed
    if roll < 0.8:
        return [x1, y1, x1, y2]  # zero width
    if roll < 0.88:
        return [x1, y1, x2, rng.choice(ODD)]
    if roll < 0.94:
        return [x1, y1, x2, y2, 0.5][: rng.choice([3, 5])]
    return None


STAGES = ["strict", "compatible", "legacy", "missing"]


def _flag(rng: random.Random) -> bool | None:
    return rng.choices([True, False, None], [8, 1, 1])[0]


def image_case(rng: random.Random, index: int) -> tuple[dict, list[dict]]:
    task = rng.choice([FO, FO, "landmark_position"])
    sample = {
        "sample_id": f"s{index}",
        "task": task,
        "difficulty": "4way",
        "gold_option_id": rng.choice("ABC"),
        "gold_bbox": _box(rng),
        "answer_bbox": _box(rng) if rng.random() < 0.7 else None,
    }
    if rng.random() < 0.3:
        sample["gold_option_ids"] = rng.sample("ABC", rng.randint(0, 3))
    if task == FO and rng.random() < 0.9:
        sample["candidates"] = [
            {"option_id": rng.choice(["A", "B", "C", "C", None]), "bbox": _box(rng),
             "view": "front"}
            for _ in range(rng.randint(0, 5))
        ]  # fmt: skip
    parsed = []
    for parse in PARSE_MODES:
        if rng.random() < 0.1:
            continue  # no row in this mode
        ids = rng.choices(["A", "B", "C", None], [3, 3, 3, 1], k=rng.choice([1, 1, 1, 0, 2, 3]))
        parsed.append(
            {
                "sample_id": sample["sample_id"],
                "task": task,
                "parse": parse,
                "stage": rng.choices(["strict", "compatible", "legacy", "missing"], [4, 2, 2, 1])[
                    0
                ],
                "option_ids": ids if rng.random() < 0.9 else None,
                "option_valid": _flag(rng),
                "bbox": _box(rng),
                "bbox_valid": _flag(rng),
                "all_valid": rng.random() < 0.8,
            }
        )
    return sample, parsed


def plain_iou(pred, gold) -> float:
    if pred is None or gold is None or len(pred) != 4 or len(gold) != 4:
        return 0.0
    if not all(math.isfinite(v) for v in (*pred, *gold)):
        return 0.0
    px1, py1, px2, py2 = pred
    gx1, gy1, gx2, gy2 = gold
    pw, ph, gw, gh = px2 - px1, py2 - py1, gx2 - gx1, gy2 - gy1
    if not (pw > 0 and ph > 0 and gw > 0 and gh > 0):
        return 0.0
    inter = max(min(px2, gx2) - max(px1, gx1), 0.0) * max(min(py2, gy2) - max(py1, gy1), 0.0)
    union = pw * ph + gw * gh - inter
    return inter / union if union > 0 else 0.0


def plain_image_rule(sample: dict, row: dict | None, parse: str) -> tuple[bool, float]:
    """One (sample, parse) row by the rule as written (docs/protocol.md §4)."""
    if row is None or row["stage"] == "missing":
        return False, 0.0
    ids = row["option_ids"] or []
    valid = bool(row["option_valid"])
    gold = sample["gold_option_id"]
    gold_set = set(sample.get("gold_option_ids") or ()) or {gold}
    if parse == "legacy":
        correct = valid and len(ids) >= 1 and None not in ids and set(ids) == gold_set
    else:
        correct = valid and len(ids) >= 1 and all(x == gold for x in ids)
    target = sample["gold_bbox"]
    if sample["task"] == FO:
        released = sample["answer_bbox"]
        if parse == "legacy":
            if released is not None and len(released) == 4 and not any(map(math.isnan, released)):
                target = released
        else:
            chosen = ids[0] if valid and len(ids) == 1 else None
            target = None
            for candidate in sample.get("candidates") or ():
                if chosen is not None and candidate["option_id"] == chosen:
                    target = candidate["bbox"]
                    break
    box = row["bbox"] if row["bbox_valid"] else None
    return correct, plain_iou(box, target)


@settings(max_examples=200, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(1, 12), st.booleans())
def test_image_kernel_equals_the_plain_rule(rng, n, sliced) -> None:
    cases = [image_case(rng, i) for i in range(n)]
    samples = [sample for sample, _ in cases]
    parsed = [row for _, rows in cases for row in rows]
    samples_t = pa.Table.from_pylist(samples, schema=SAMPLES)
    parsed_t = pa.Table.from_pylist(parsed, schema=PARSED)
    if sliced:  # every array starts at a non-zero offset (bitmaps too)
        samples_t = pa.concat_tables([samples_t.slice(0, 1), samples_t]).slice(1)
        samples_t = pa.Table.from_batches(samples_t.to_batches())
        parsed_t = pa.concat_tables([parsed_t, parsed_t]).slice(parsed_t.num_rows)
    scores = score_tables(samples_t, parsed_t).to_pylist()
    row_of = {(r["sample_id"], r["parse"]): r for r in parsed}
    want = [
        plain_image_rule(sample, row_of.get((sample["sample_id"], parse)), parse)
        for parse in PARSE_MODES
        for sample in samples
    ]
    got = [(s["option_correct"], s["iou"]) for s in scores]
    assert got == want


@pytest.mark.parametrize("n", [0, 1])
def test_image_kernel_on_tiny_tables(n) -> None:
    sample = {"sample_id": "s0", "task": "landmark_position", "difficulty": "4way"}
    sample |= {"gold_option_id": "A", "gold_bbox": [0.0, 0.0, 0.5, 0.5]}
    row = {"sample_id": "s0", "task": "landmark_position", "parse": "strict", "stage": "strict"}
    row |= {"option_ids": ["A"], "option_valid": True, "bbox": [0.0, 0.0, 0.5, 0.25]}
    row |= {"bbox_valid": True, "all_valid": True}
    samples = pa.Table.from_pylist([sample][:n], schema=SAMPLES)
    scores = score_tables(samples, pa.Table.from_pylist([row][:n], schema=PARSED)).to_pylist()
    want = [(True, 0.5), (False, 0.0), (False, 0.0)][: 3 * n]
    assert [(s["option_correct"], s["iou"]) for s in scores] == want


# -- compiled once, loaded everywhere ------------------------------------------------------------

_SCORE_VARIED_RUN = """
import numba, pyarrow as pa, random, sys
sys.path.insert(0, {tests!r})
import test_score_kernels as kernels
from score_fixtures import (behavior_parsed, behavior_sample, parsed_frame, samples_frame,
                            visibility_parsed, visibility_sample)
from dualcog import scoring
from dualcog.scoring import score_samples
rng = random.Random(3)
cases = [kernels.image_case(rng, i) for i in range(40)]
samples = [sample for sample, _ in cases]
parsed = [row for _, rows in cases for row in rows]
score_samples(pa.Table.from_pylist(samples, schema=kernels.SAMPLES),
              pa.Table.from_pylist(parsed, schema=kernels.PARSED))
video = [behavior_sample("b", {{"A": "atomic", "B": "composite"}},
                         [("A", "atomic", [[0.0, 2.0], [3.0, 5.0]]), ("B", "composite", [])],
                         composite_mission=True, duration=None),
         visibility_sample("v", 2, [[0.0, 1.0], [2.0, 9.0]])]
answers = [behavior_parsed("b", [("A", [[0.0, 2.5]]), ("A", [[3.0, 4.0]]), ("C", [[1.0, 2.0]])]),
           visibility_parsed("v", 2, [[0.0, 1.5], [9.0, 3.0]])]
score_samples(samples_frame(video), parsed_frame(answers))
compiled = []
for module in list(sys.modules.values()):
    if module is not None and module.__name__.startswith("dualcog.scoring"):
        for name, value in vars(module).items():
            if isinstance(value, numba.core.registry.CPUDispatcher):
                compiled += [name for _ in value.stats.cache_misses]
print("compiled:", sorted(set(compiled)))
"""


def test_kernels_compiled_at_warm_up_serve_every_later_run(tmp_path) -> None:
    """After `compile_kernels` (the workflow's start), scoring other runs, with nulls, odd
    boxes and video answers, compiles nothing: every kernel loads from numba's cache."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    warm = "from dualcog.scoring.warmup import compile_kernels; compile_kernels()"
    subprocess.run([sys.executable, "-c", warm], env=env, check=True)
    script = _SCORE_VARIED_RUN.format(tests=str(Path(__file__).parent))
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, check=True, capture_output=True, text=True
    ).stdout
    assert out.strip().splitlines()[-1] == "compiled: []", out
    assert any((tmp_path / "numba").rglob("*.nbc"))  # the cache was used, not bypassed
