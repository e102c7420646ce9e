"""Parse cost: ours against a plain implementation of the same rules, on the same texts.

Three parts, each printing CPU time (this process) beside wall time:

1. A realistic, deterministic mix of image responses: the three-mode image parse
   (`parse_image_modes`) against a naive one that applies each rule as written, mode by mode
   (one regex substitution for reasoning tags, a regex for fences, every `{` tried with its
   own balanced scan, a fresh `json.loads` per mode). Outputs are asserted identical.
   Plain `json.loads` over the same texts is printed as a floor.
2. `parse_run` over the mix as one model run.
3. Adversarial texts (brace soup, deep nesting, unclosed tags, huge integers...) at 4 KiB up
   to 16 MiB (there is no length limit, §3 v2.3): ours per response (an image one in its
   three modes, a behavior or visibility one in its two); the naive parse beside it at
   --naive-sizes (it is quadratic on several of these), outputs asserted identical.

Usage: python benchmarks/parse_throughput.py [--n 20000] [--seconds 2]
       [--sizes 4096,65536,1048576,16777216] [--naive-sizes 4096]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from dualcog.parsing import (
    NOT_JSON,
    finish_image_compatible,
    parse_behavior_modes,
    parse_image_modes,
    parse_run,
    parse_visibility_modes,
)
from dualcog.parsing.compatible import (
    behavior_from_candidate,
    recover_image_from_candidate,
    visibility_from_candidate,
)
from dualcog.parsing.fields import offered_ids
from dualcog.parsing.jsontext import MAX_JSON_DEPTH, int_of_any_size
from dualcog.parsing.legacy import LEGACY_MAX_DEPTH, image_legacy_from_candidate
from dualcog.parsing.scale import NORM
from dualcog.parsing.strict import (
    behavior_strict_from_value,
    image_strict_from_value,
    visibility_strict_from_value,
)

OFFERED = ("A", "B", "C", "D")
OPTIONS = [{"option_id": o, "label": o, "level": None} for o in OFFERED]

# --- the realistic mix ----------------------------------------------------------------------


def _box(rng: random.Random, scale: float = 1.0) -> list[float]:
    x1, y1 = rng.uniform(0, 0.6), rng.uniform(0, 0.6)
    x2, y2 = x1 + rng.uniform(0.05, 0.4), y1 + rng.uniform(0.05, 0.4)
    if scale == 1.0:
        return [round(c, 3) for c in (x1, y1, x2, y2)]
    return [round(c * scale) for c in (x1, y1, x2, y2)]


def _canonical(rng: random.Random, scale: float = 1.0) -> str:
    body = {"answer_option_id": rng.choice(OFFERED), "bbox_xyxy_norm": _box(rng, scale)}
    return json.dumps(body, separators=(",", ":") if rng.random() < 0.7 else (", ", ": "))


def realistic_mix(n: int, seed: int = 20240601) -> list[str]:
    """Mostly strict-valid JSON, plus the malformed shapes models actually produce."""
    rng = random.Random(seed)
    texts = []
    for _ in range(n):
        roll = rng.random()
        if roll < 0.76:
            texts.append(_canonical(rng))
        elif roll < 0.81:
            texts.append(f"```json\n{_canonical(rng)}\n```")
        elif roll < 0.85:
            texts.append(
                "Based on the reference view, the landmark appears to the left of my position. "
                f"Final answer: {_canonical(rng)} I hope this helps!"
            )
        elif roll < 0.89:
            texts.append(
                '<think>The facade faces north, so {"guess": "B"} is wrong; compare the '
                "roof edges and the {shadow} direction before deciding.</think>\n" + _canonical(rng)
            )
        elif roll < 0.93:
            texts.append(_canonical(rng, scale=1000.0))
        elif roll < 0.95:
            body = {"answer": rng.choice("abcd"), "bbox": _box(rng)}
            texts.append(json.dumps({"answers": [body]}))
        elif roll < 0.97:
            texts.append(f"Option: {rng.choice(OFFERED)}\nBBox: {_box(rng)}")
        elif roll < 0.985:
            texts.append(_canonical(rng)[: rng.randint(5, 40)])  # truncated output
        else:
            texts.append("I cannot determine the landmark's position from these images.")
    return texts


# --- adversarial texts ----------------------------------------------------------------------


def _repeat(unit: str, size: int, tail: str = "") -> str:
    body = (unit * (size // len(unit) + 1))[: size - len(tail)]
    return body + tail


ADVERSARIAL: dict[str, Callable[[int], str]] = {
    "{a} repeated": lambda n: _repeat("{a}", n),
    '{"a"} repeated': lambda n: _repeat('{"a"}', n),
    '{"a":1, repeated': lambda n: _repeat('{"a":1,', n),
    '{"a":1 ... }': lambda n: _repeat('{"a":1', n, "}"),
    '{"a": nested, fails': lambda n: _repeat('{"a":', n, "x}"),
    "[ x n then ]": lambda n: "[" * (n - 1) + "]",
    "[[] repeated": lambda n: _repeat("[[]", n, "]"),
    '[{"a":[ ... ]}': lambda n: _repeat('[{"a":[', n, "]}"),
    '{"a":{} ... }': lambda n: _repeat('{"a":{}', n, "}"),
    "<think> repeated": lambda n: _repeat("<think>", n),
    "<think></think> repeated": lambda n: _repeat("<think></think>", n),
    "``` repeated": lambda n: _repeat("```", n),
    '" and \\ soup': lambda n: _repeat('"\\', n),
    "one huge integer": lambda n: '{"visible_count":' + "9" * (n - 40) + "}",
    "BBox: prefix": lambda n: _repeat("BBox: 0.1, 0.2, ", n),
    "BBox: then spaces": lambda n: "BBox:" + " " * (n - 5),
    "BBox: then newlines": lambda n: "BBox:" + "\n" * (n - 5),
    "BBox:( then spaces, digits": lambda n: "BBox:(" + " " * (n // 2) + "1" * (n - 6 - n // 2),
    "long digit run": lambda n: "1" * n,
    "<reasoning> repeated": lambda n: _repeat("<REASONING>", n),
    '"unclosed string': lambda n: '{"a":"' + "x" * (n - 6),
    "</think> repeated": lambda n: _repeat("</think>", n),
    "prose with letters": lambda n: _repeat("The answer is B, not A or C. ", n),
}


# --- the naive implementation ----------------------------------------------------------------


class _Rejected(ValueError):
    pass


def _reject(name: str) -> Any:
    raise _Rejected(name)


def _naive_depth(text: str) -> int:
    """Deepest nesting outside strings, one character at a time."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def _naive_loads(text: str, rfc: bool = True, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """json.loads with the protocol's rules: RFC constants, depth, integers of any size."""
    depth = _naive_depth(text)
    if depth > max_depth:
        return NOT_JSON
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(limit + depth + 50)
    try:
        if rfc:
            return json.loads(text, parse_constant=_reject, parse_int=int_of_any_size)
        return json.loads(text)
    except (ValueError, RecursionError):
        return NOT_JSON
    finally:
        sys.setrecursionlimit(limit)


_BLOCK = re.compile(r"<(think|reasoning)>.*?</\1>", re.IGNORECASE | re.DOTALL)
_OPENER = re.compile(r"<(?:think|reasoning)>", re.IGNORECASE)
_CLOSERS = re.compile(r".*</(?:think|reasoning)>", re.IGNORECASE | re.DOTALL)
_FENCE = re.compile(r"```[^\n]*\n(.*?)```", re.DOTALL)
_TOKENS = {
    "{": re.compile(r'"(?:[^"\\]+|\\.)*(?:"|\\?\Z)|[{}]', re.DOTALL),
    "[": re.compile(r'"(?:[^"\\]+|\\.)*(?:"|\\?\Z)|[\[\]]', re.DOTALL),
}


def _naive_reasoning(text: str) -> str:
    text = _BLOCK.sub("", text)
    opener = _OPENER.search(text)
    if opener is not None:
        text = text[: opener.start()]
    through = _CLOSERS.match(text)
    return text if through is None else text[through.end() :]


def _naive_balanced(text: str, opener: str) -> Any:
    """Every opener in text order, each with its own scan to its balanced end."""
    for start in [i for i, char in enumerate(text) if char == opener]:
        depth = 0
        for match in _TOKENS[opener].finditer(text, start):
            char = match.group()[0]
            if char == '"':
                continue
            depth += 1 if char == opener else -1
            if depth == 0:
                value = _naive_loads(text[start : match.end()])
                if value is not NOT_JSON:
                    return value
                break
    return NOT_JSON


def _naive_candidate(raw: str) -> tuple[Any, str]:
    text = _naive_reasoning(raw)
    value = _naive_loads(text.strip())
    if type(value) in (dict, list):
        return value, "strict"
    fence = _FENCE.search(text)
    if fence is not None:
        value = _naive_loads(fence.group(1).strip())
        if type(value) in (dict, list):
            return value, "fence"
    for opener in "{[":
        value = _naive_balanced(text, opener)
        if value is not NOT_JSON:
            return value, "balanced"
    return None, "invalid"


def _naive_legacy_candidate(raw: str) -> Any:
    text = raw.strip()
    start, end = text.find("{"), text.rfind("}")
    if start == -1 or end < start:
        return NOT_JSON
    return _naive_loads(text[start : end + 1], rfc=False, max_depth=LEGACY_MAX_DEPTH)


def naive_image_modes(raw: str, offered: Any) -> tuple:
    offered = offered_ids(offered)
    strict = image_strict_from_value(_naive_loads(raw.strip()), offered)
    candidate, stage = _naive_candidate(raw)
    compatible = finish_image_compatible(
        recover_image_from_candidate(candidate, stage, offered), NORM
    )
    legacy = image_legacy_from_candidate(raw, _naive_legacy_candidate(raw))
    return strict, compatible, legacy


def naive_video_modes(raw: str, offered: Any) -> tuple:
    offered = offered_ids(offered)
    parsed = _naive_loads(raw.strip())
    candidate, stage = _naive_candidate(raw)
    behavior = (
        behavior_strict_from_value(parsed, offered),
        behavior_from_candidate(candidate, stage, offered),
    )
    visibility = (visibility_strict_from_value(parsed), visibility_from_candidate(candidate, stage))
    return behavior, visibility


# --- timing ---------------------------------------------------------------------------------


def _timed(func: Callable[[], Any]) -> tuple[Any, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = func()
    return result, time.process_time() - cpu, time.perf_counter() - wall


def _best_of(func: Callable[[], Any], repeats: int = 3) -> tuple[Any, float, float]:
    """The fastest of a few runs (a shared machine adds noise, never saves time)."""
    runs = [_timed(func) for _ in range(repeats)]
    return runs[0][0], min(run[1] for run in runs), min(run[2] for run in runs)


def _rate(func: Callable[[str], Any], texts: list[str], seconds: float) -> tuple[float, float]:
    """(responses per CPU second, responses per wall second), repeating the list."""
    done = 0
    wall, cpu = time.perf_counter(), time.process_time()
    while True:
        for text in texts:
            func(text)
        done += len(texts)
        cpu_elapsed = time.process_time() - cpu
        if cpu_elapsed >= seconds:
            return done / cpu_elapsed, done / (time.perf_counter() - wall)


def _plain_loads(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        return None


def realistic(n: int, seconds: float) -> None:
    texts = realistic_mix(n)
    ours = [parse_image_modes(text, OFFERED) for text in texts]
    naive = [naive_image_modes(text, OFFERED) for text in texts]
    assert ours == naive, "ours and the naive parse disagree on the realistic mix"
    print(f"1. realistic mix, {len(texts):,} image texts: outputs identical (all three modes)")
    print(f"   {'':28}{'resp/s (CPU)':>14}{'resp/s (wall)':>15}")
    rows = [
        ("three-mode parse, ours", lambda t: parse_image_modes(t, OFFERED)),
        ("three-mode parse, naive", lambda t: naive_image_modes(t, OFFERED)),
        ("plain json.loads (floor)", _plain_loads),
    ]
    rates = {}
    for label, func in rows:
        cpu_rate, wall_rate = _rate(func, texts, seconds)
        rates[label] = cpu_rate
        print(f"   {label:28}{cpu_rate:>14,.0f}{wall_rate:>15,.0f}")
    speedup = rates["three-mode parse, ours"] / rates["three-mode parse, naive"]
    print(f"   ours / naive (CPU): {speedup:.1f}x")

    sample_ids = [f"s{i:06d}" for i in range(n)]
    samples = pa.table(
        {"sample_id": sample_ids, "task": ["landmark_position"] * n, "options": [OPTIONS] * n}
    )
    responses = pa.table({"sample_id": sample_ids, "raw_text": texts, "status": ["ok"] * n})
    (table, info), cpu, wall = _timed(lambda: parse_run(samples, responses))
    print(
        f"2. parse_run on {n:,} image samples ({table.num_rows:,} rows): {cpu:.2f} s CPU, "
        f"{wall:.2f} s wall ({n / cpu:,.0f} samples per CPU s); scale={info['scale']}"
    )


def adversarial(sizes: list[int], naive_sizes: set[int]) -> None:
    """ms per response: an image response (three modes), a behavior or visibility one (two)."""
    print("3. adversarial texts: ms per response, best of 3 (CPU; wall in brackets); naive =")
    print("   the naive image parse, run once")
    header = f"   {'case':26}{'chars':>8}{'image':>17}{'behavior':>10}{'visibility':>11}"
    print(header + f"{'naive image':>13}")
    worst: dict[int, float] = {}
    for name, make in ADVERSARIAL.items():
        for size in sizes:
            text = make(size)
            image, image_cpu, image_wall = _timed(
                lambda text=text: parse_image_modes(text, OFFERED)
            )
            behavior, behavior_cpu, _ = _timed(
                lambda text=text: parse_behavior_modes(text, OFFERED)
            )
            visibility, visibility_cpu, _ = _timed(lambda text=text: parse_visibility_modes(text))
            worst[size] = max(worst.get(size, 0.0), image_cpu, behavior_cpu, visibility_cpu)
            naive_column = ""
            if size in naive_sizes:
                naive_image, naive_cpu, _ = _timed(
                    lambda text=text: naive_image_modes(text, OFFERED)
                )
                assert image == naive_image, f"image parses disagree on {name!r} at {size}"
                naive_video = naive_video_modes(text, OFFERED)
                assert (behavior, visibility) == naive_video, f"video parses disagree: {name!r}"
                naive_column = f"{naive_cpu * 1000:>13.1f}"
            print(
                f"   {name:26}{size:>8}{image_cpu * 1000:>8.1f} ({image_wall * 1000:>6.1f})"
                f"{behavior_cpu * 1000:>10.1f}{visibility_cpu * 1000:>11.1f}{naive_column}"
            )
    for size, seconds in sorted(worst.items()):
        print(f"   worst case at {size:>7,} chars: {seconds * 1000:.1f} ms CPU per response")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--sizes", default="4096,65536,1048576,16777216")
    parser.add_argument("--naive-sizes", default="4096")
    args = parser.parse_args()
    realistic(args.n, args.seconds)
    sizes = [int(size) for size in args.sizes.split(",")]
    naive_sizes = {int(size) for size in args.naive_sizes.split(",") if size}
    adversarial(sizes, naive_sizes)


if __name__ == "__main__":
    main()
