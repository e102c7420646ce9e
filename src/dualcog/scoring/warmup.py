"""Compile the scoring kernels once, before the jobs that use them start.

numba compiles a kernel on its first call and caches the machine code beside the module
(or in NUMBA_CACHE_DIR); later processes load it in milliseconds. Score jobs started
together on a cold cache would each compile every kernel themselves, so the workflow calls
`compile_kernels` at start (Snakefile `onstart:`): one compilation, then every job loads it.
It scores one tiny run of each request kind through `score_tables`, so exactly the kernel
signatures the score jobs use are compiled: the tables have the workflow's own schemas.
"""

from __future__ import annotations

import time

import pyarrow as pa

from dualcog.schemas import PARSED, SAMPLES
from dualcog.scoring.score import score_tables
from dualcog.tasks import PARSE_MODES

_BOX = [0.1, 0.1, 0.5, 0.5]


def _tiny_run() -> tuple[pa.Table, pa.Table]:
    """One sample of each request kind, answered in every parse mode."""
    samples = [
        {"sample_id": "image", "task": "future_observation", "difficulty": "4way",
         "gold_option_id": "A", "gold_bbox": _BOX, "answer_bbox": _BOX,
         "candidates": [{"option_id": "A", "bbox": _BOX, "view": "front"}]},
        {"sample_id": "behavior", "task": "behavior", "difficulty": "easy",
         "duration_sec": 10.0, "composite_mission": True,
         "options": [{"option_id": "A", "label": "a", "level": "composite"}],
         "gold_items": [{"option_id": "A", "label": "a", "level": "composite",
                         "intervals": [[1.0, 4.0]]}]},
        {"sample_id": "visibility", "task": "landmark_visibility", "difficulty": "easy",
         "duration_sec": 10.0, "gold_visible_count": 1, "gold_visible_intervals": [[1.0, 4.0]]},
    ]  # fmt: skip
    answers = {
        "image": {"option_ids": ["A"], "option_valid": True, "bbox": _BOX, "bbox_valid": True},
        "behavior": {
            "answers": [{"option_id": "A", "intervals": [[1.0, 3.0]]}],
            "answers_valid": True,
        },
        "visibility": {"visible_count": 1, "count_valid": True,
                       "visible_intervals": [[1.0, 3.0]], "intervals_valid": True},
    }  # fmt: skip
    parsed = [
        {"sample_id": sample["sample_id"], "task": sample["task"], "parse": parse,
         "stage": "strict", "all_valid": True, **answers[sample["sample_id"]]}
        for parse in PARSE_MODES
        for sample in samples
    ]  # fmt: skip
    return pa.Table.from_pylist(samples, schema=SAMPLES), pa.Table.from_pylist(
        parsed, schema=PARSED
    )


def compile_kernels() -> float:
    """Compile (or load from numba's cache) every scoring kernel; seconds it took."""
    start = time.perf_counter()
    score_tables(*_tiny_run())
    return time.perf_counter() - start
