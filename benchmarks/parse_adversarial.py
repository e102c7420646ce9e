"""Parse cost on adversarial texts of 1 MB and 16 MB: CPU-s per text in each parse mode.

There is no length limit (§3 v2.3), so parsing must stay linear in the text's length
(issue 22: a 1 MB text in at most 0.2 CPU-s per mode, 16 MB in at most 3 CPU-s). For every
text below, each mode is timed on its own (`parse_image_strict`, `parse_image_compatible`,
`parse_image_legacy`), then all three together as `parse_run` does (`parse_image_modes`),
then the two video parses (behavior and visibility, strict and compatible together).

Beside ours, the fair naive reading of each rule where one finishes (benchmarks/
parse_throughput.py: plain `json.loads` with the protocol's depth and number rules for strict
and legacy; every opener tried with its own balanced scan, a regex substitution for tags, for
compatible); its output is asserted equal to ours. The naive compatible parse is quadratic on
many of these texts, so it runs only up to --naive-compatible-max characters.

Usage: python benchmarks/parse_adversarial.py [--sizes 1048576,16777216]
       [--naive-compatible-max 65536] [--only 'NAME|...'] [--repeats 1]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from _timing import machine  # noqa: E402
from parse_throughput import (  # noqa: E402
    _naive_candidate,
    _naive_legacy_candidate,
    _naive_loads,
)

from dualcog.parsing import (  # noqa: E402
    finish_image_compatible,
    parse_behavior_modes,
    parse_image_compatible,
    parse_image_legacy,
    parse_image_modes,
    parse_image_strict,
    parse_visibility_modes,
)
from dualcog.parsing.compatible import recover_image_from_candidate  # noqa: E402
from dualcog.parsing.fields import offered_ids  # noqa: E402
from dualcog.parsing.legacy import image_legacy_from_candidate  # noqa: E402
from dualcog.parsing.scale import NORM  # noqa: E402
from dualcog.parsing.strict import image_strict_from_value  # noqa: E402

OFFERED = ("A", "B", "C", "D")
CANONICAL = '{"answer_option_id":"B","bbox_xyxy_norm":[0.12,0.2,0.5,0.61]}'
BUDGET_CPU_S = {1 << 20: 0.2, 1 << 24: 3.0}  # issue 22


def _repeat(unit: str, size: int, tail: str = "") -> str:
    body = (unit * (size // len(unit) + 1))[: size - len(tail)]
    return body + tail


_SOUP = [
    "{", "}", "[", "]", '"', "\\", ":", ",", " ", "\n", "1", "a", '"k"', '{"a":', "[1,", "]}",
    "<think>", "</think>", "```", "BBox:", "Option: B", "NaN", "9999",
]  # fmt: skip


def _soup(size: int, seed: int = 22) -> str:
    rng = random.Random(seed)
    pieces = rng.choices(_SOUP, k=size // 2)
    return "".join(pieces)[:size]


def _huge_valid_answer(size: int) -> str:
    """A canonical image answer with one long extra array: valid in every mode."""
    head = '{"answer_option_id":"B","bbox_xyxy_norm":[0.12,0.2,0.5,0.61],"trace":['
    text = head + "0," * ((size - len(head) - 3) // 2) + "0]}"
    return text + " " * (size - len(text))


TEXTS: dict[str, Callable[[int], str]] = {
    "[ unclosed": lambda n: "[" * n,
    "[ then one ]": lambda n: "[" * (n - 1) + "]",
    '{"a": unclosed': lambda n: _repeat('{"a":', n),
    '{"a": nested, x}': lambda n: _repeat('{"a":', n, "x}"),
    '" repeated': lambda n: '"' * n,
    '"\\ repeated': lambda n: _repeat('"\\', n),
    "<think> repeated": lambda n: _repeat("<think>", n),
    "BBox: then spaces": lambda n: "BBox:" + " " * (n - 5),
    "alternating [{": lambda n: _repeat("[{", n),
    "alternating [{ closed": lambda n: _repeat("[{", n // 2) + _repeat("}]", n - n // 2),
    "alternating {[}]": lambda n: _repeat("{[}]", n),
    "long digit run": lambda n: "1" * n,
    '{"a":long digits}': lambda n: '{"a":' + "7" * (n - 6) + "}",
    "{} pairs": lambda n: _repeat("{}", n),
    "{a} pairs": lambda n: _repeat("{a}", n),
    '{"a"} pairs': lambda n: _repeat('{"a"}', n),
    '{"a":1 ... }': lambda n: _repeat('{"a":1', n, "}"),
    # Runs of short closed spans that can begin a value and fail (parsing.brackets marks
    # them without parsing: a character or a pair of neighbours no JSON value holds).
    '{"a":1x} pairs': lambda n: _repeat('{"a":1x}', n),
    "[1x] pairs": lambda n: _repeat("[1x]", n),
    '{"a":[1x]} pairs': lambda n: _repeat('{"a":[1x]}', n),
    '{"a":"b"x} pairs': lambda n: _repeat('{"a":"b"x}', n),
    "[1,x] pairs": lambda n: _repeat("[1,x]", n),
    '{"a":1,} pairs': lambda n: _repeat('{"a":1,}', n),
    "[1,] pairs": lambda n: _repeat("[1,]", n),
    "failing, spaced": lambda n: _repeat('{"a": 1x}\n[ 1, ]\t{"a" :[1x] }\r\n', n),
    "[1 2] pairs": lambda n: _repeat("[1 2]", n),
    "[01] pairs": lambda n: _repeat("[01]", n),
    "[tru] pairs": lambda n: _repeat("[tru]", n),
    "[nul] pairs": lambda n: _repeat("[nul]", n),
    '{"a":1 "b":2} pairs': lambda n: _repeat('{"a":1 "b":2}', n),
    "valid padded": lambda n: CANONICAL + " " * (n - len(CANONICAL)),
    "valid with huge array": _huge_valid_answer,
    "random soup": _soup,
}


# --- the naive reading of each mode ----------------------------------------------------------


def naive_strict(raw: str) -> Any:
    return image_strict_from_value(_naive_loads(raw.strip()), offered_ids(OFFERED))


def naive_compatible(raw: str) -> Any:
    candidate, stage = _naive_candidate(raw)
    recovery = recover_image_from_candidate(candidate, stage, offered_ids(OFFERED))
    return finish_image_compatible(recovery, NORM)


def naive_legacy(raw: str) -> Any:
    return image_legacy_from_candidate(raw, _naive_legacy_candidate(raw))


def _timed(func: Callable[[], Any], repeats: int) -> tuple[Any, float, float]:
    """(result, least CPU-s, least wall-s) over `repeats` calls."""
    best_cpu = best_wall = float("inf")
    result = None
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        result = func()
        best_cpu = min(best_cpu, time.process_time() - cpu)
        best_wall = min(best_wall, time.perf_counter() - wall)
    return result, best_cpu, best_wall


def run(sizes: list[int], naive_compatible_max: int, only: set[str], repeats: int) -> int:
    print(f"machine: {machine()}")
    print("CPU-s per text (least of --repeats); naive beside ours in brackets, outputs equal;")
    print("'-' = naive not run (quadratic at this size). * = over the issue-22 budget.")
    columns = ("strict", "compatible", "legacy", "3 modes", "video")
    print(f"{'text':24}{'chars':>10}" + "".join(f"{c:>20}" for c in columns))
    over: list[str] = []
    for name, make in TEXTS.items():
        if only and name not in only:
            continue
        for size in sizes:
            raw = make(size)
            assert len(raw) == size, (name, len(raw))
            ours = {
                "strict": lambda raw=raw: parse_image_strict(raw, OFFERED),
                "compatible": lambda raw=raw: parse_image_compatible(raw, OFFERED),
                "legacy": lambda raw=raw: parse_image_legacy(raw),
                "3 modes": lambda raw=raw: parse_image_modes(raw, OFFERED),
                "video": lambda raw=raw: (
                    parse_behavior_modes(raw, OFFERED),
                    parse_visibility_modes(raw),
                ),
            }
            naive = {
                "strict": lambda raw=raw: naive_strict(raw),
                "compatible": lambda raw=raw: naive_compatible(raw),
                "legacy": lambda raw=raw: naive_legacy(raw),
            }
            cells = []
            results = {}
            for column in columns:
                result, cpu, _wall = _timed(ours[column], repeats)
                results[column] = result
                budget = BUDGET_CPU_S.get(size)
                # The budget is per mode; "3 modes" and "video" are several modes at once.
                modes = {"3 modes": 3, "video": 4}.get(column, 1)
                flag = "*" if budget is not None and cpu > budget * modes else " "
                if flag == "*":
                    over.append(f"{name} at {size:,} chars, {column}: {cpu:.3f} CPU-s")
                naive_cell = ""
                if column in naive and (column != "compatible" or size <= naive_compatible_max):
                    naive_result, naive_cpu, _ = _timed(naive[column], 1)
                    assert naive_result == result, f"{column} parses disagree on {name!r}"
                    naive_cell = f"({naive_cpu:.3f})"
                elif column in naive:
                    naive_cell = "(-)"
                cells.append(f"{cpu:>9.3f}{flag}{naive_cell:>10}")
            assert results["3 modes"] == (
                results["strict"],
                results["compatible"],
                results["legacy"],
            ), f"the three-mode parse differs from the modes on {name!r}"
            print(f"{name:24}{size:>10,}" + "".join(f"{cell:>20}" for cell in cells))
            sys.stdout.flush()
    if over:
        print("over budget:")
        for line in over:
            print(f"  {line}")
    else:
        print("every text within budget (0.2 CPU-s per mode at 1 MiB, 3 CPU-s at 16 MiB)")
    return 1 if over else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1048576,16777216")
    parser.add_argument("--naive-compatible-max", type=int, default=65536)
    # Names hold commas (`[1,x] pairs`), so they are separated by `|`.
    parser.add_argument("--only", default="", help="text names separated by |")
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    only = {name for name in args.only.split("|") if name}
    sys.exit(run(sizes, args.naive_compatible_max, only, args.repeats))


if __name__ == "__main__":
    main()
