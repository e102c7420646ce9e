"""Text-level JSON recovery shared by the parse modes (docs/protocol.md, parsing stages 0–3).

Everything here is pure string work: RFC 8259 loading, reasoning-tag removal, the first
markdown fence, and the first balanced `{…}` / `[…]` that parses. No function raises on any
input text, at any nesting depth.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from dualcog.parsing.brackets import Spans, balanced_spans, deepest_nesting, surely_failing


class _NotJson:
    """Sentinel for "this text is not one JSON value" (JSON `null` is a valid result)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NOT_JSON"


NOT_JSON: Any = _NotJson()


class _RejectedConstant(ValueError):
    pass


def _reject_constant(name: str) -> Any:
    # RFC 8259 has no NaN / Infinity tokens; Python's json accepts them unless told not to.
    raise _RejectedConstant(f"non-RFC-8259 constant {name}")


# Python refuses to turn more than 4,300 digits into an int (a guard against slow
# conversions: exact conversion costs about n^1.5, 45 CPU-s for 16 MB of digits). The protocol
# has no size limit on integers, but nothing it does with one that long depends on its digits:
# as a count it is valid and can equal no gold count (and is stored clamped to int64), as a
# coordinate or interval value it is beyond the double range (non-finite). So such a literal
# reads as a stand-in of the same sign with more digits than the guard: every outcome is the
# exact value's, and parsing stays linear in the text's length (docs/decisions.md).
_EXACT_DIGITS = 4300
BEYOND_EXACT_DIGITS = 10**_EXACT_DIGITS  # a 4,301-digit number, larger than any double


def int_of_any_size(literal: str) -> int:
    """A JSON integer literal (optional `-`, digits) as an int of the same protocol outcome.

    Up to 4,300 digits the exact value; longer literals give `±BEYOND_EXACT_DIGITS`.
    """
    negative = literal.startswith("-")
    digits = literal[1:] if negative else literal
    value = int(digits) if len(digits) <= _EXACT_DIGITS else BEYOND_EXACT_DIGITS
    return -value if negative else value


# Python's decoder already lets the last duplicate key win and rejects control characters
# inside strings (strict=True), which is what RFC 8259 parsing means for this protocol.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
# The same rules, for the rare text holding an integer literal beyond Python's digit guard.
_BIG_INT_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_int=int_of_any_size)
_SCAN_ONCE = _DECODER.scan_once
_BIG_INT_SCAN_ONCE = _BIG_INT_DECODER.scan_once
_JSON_WHITESPACE = " \t\n\r"

# --- nesting depth --------------------------------------------------------------------------

# A value nested deeper than this (arrays and objects together) does not parse in strict and
# compatible mode; at this depth or less, depth never makes a text invalid.
MAX_JSON_DEPTH = 512
# Below this many brackets a text cannot come near the interpreter's recursion limit.
_SHALLOW_BRACKETS = 100

# A JSON string (backslash escapes honoured; an unterminated one runs to the end of the text).
_STRING = r'"(?:[^"\\]+|\\.)*(?:"|\\?\Z)'


def json_depth(text: str) -> int:
    """Deepest bracket nesting outside JSON strings, as a JSON scanner would meet it.

    Up to the first error, a scanner is exactly this deep; past it, it has stopped. Done in
    numpy passes (parsing.brackets), so 16 MB of brackets cost milliseconds.
    """

    return deepest_nesting(text)


def call_with_depth_headroom(depth: int, func: Callable[[str], Any], text: str) -> Any:
    """`func(text)` with room for `depth` nested C-level calls above the current stack.

    Python's decoder recurses once per nesting level and counts those calls against the
    recursion limit together with the caller's frames, so whether a deep text parses would
    otherwise depend on where the parser is called from.
    """
    if depth < _SHALLOW_BRACKETS:
        return func(text)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(limit + depth + 50)
    try:
        return func(text)
    finally:
        sys.setrecursionlimit(limit)


def _decode_rfc(text: str) -> Any:
    """`text` as one RFC 8259 value, or NOT_JSON; the decoder's RecursionError propagates."""
    try:
        if text and text[0] not in _JSON_WHITESPACE:
            # What JSONDecoder.decode does, minus its Python-level whitespace handling.
            value, end = _SCAN_ONCE(text, 0)
            if end == len(text) or not text[end:].strip(_JSON_WHITESPACE):
                return value
            return NOT_JSON
        return _DECODER.decode(text)
    except (json.JSONDecodeError, _RejectedConstant, StopIteration):
        # StopIteration is the scanner's "no value here".
        return NOT_JSON
    except ValueError:
        # An integer literal beyond Python's digit guard: parse again without the guard.
        pass
    try:
        return _BIG_INT_DECODER.decode(text)
    except ValueError:
        return NOT_JSON


def _loads_rfc(text: str) -> Any:
    try:
        return _decode_rfc(text)
    except RecursionError:
        return NOT_JSON


def loads_json(text: str) -> Any:
    """Parse `text` as exactly one RFC 8259 JSON value, or return NOT_JSON."""
    if text.count("[") + text.count("{") <= _SHALLOW_BRACKETS:
        return _loads_rfc(text)
    # A long text that is not JSON usually fails early, so it is parsed before its depth is
    # measured (a pass over the whole text): the depth decides only for a value, or when the
    # decoder ran out of recursion, which headroom for up to MAX_JSON_DEPTH levels prevents.
    try:
        value = _decode_rfc(text)
    except RecursionError:
        pass
    else:
        if value is NOT_JSON or json_depth(text) <= MAX_JSON_DEPTH:
            return value
        return NOT_JSON
    depth = json_depth(text)
    if depth > MAX_JSON_DEPTH:
        return NOT_JSON
    return call_with_depth_headroom(depth, _loads_rfc, text)


def _scan_span(text: str) -> tuple[Any, int]:
    """(value, -1), or (NOT_JSON, position of the first error, or -1 when unknown)."""
    try:
        value, end = _SCAN_ONCE(text, 0)
    except json.JSONDecodeError as error:
        return NOT_JSON, error.pos
    except (_RejectedConstant, RecursionError, StopIteration):
        return NOT_JSON, -1
    except ValueError:
        # An integer literal beyond Python's digit guard: parse again without the guard.
        try:
            value, end = _BIG_INT_SCAN_ONCE(text, 0)
        except json.JSONDecodeError as error:
            return NOT_JSON, error.pos
        except (ValueError, RecursionError, StopIteration):
            return NOT_JSON, -1
    return (value, -1) if end == len(text) else (NOT_JSON, -1)


# --- stage 0: reasoning removal -------------------------------------------------------------

# §3.2 stage 0 (v2.3): tag names fold ASCII letters only. Without re.ASCII, IGNORECASE also
# folds `ı`, `İ`, `ſ` (so `<thınk>` would open a block, and its name miss the closer table).
_TAG_CASE = re.IGNORECASE | re.ASCII
_REASONING_OPEN = re.compile(r"<(think|reasoning)>", _TAG_CASE)
_REASONING_CLOSE = {
    "think": re.compile(r"</think>", _TAG_CASE),
    "reasoning": re.compile(r"</reasoning>", _TAG_CASE),
}
# Greedy prefix: the match ends at the last closing tag.
_THROUGH_LAST_CLOSE = re.compile(r".*</(?:think|reasoning)>", _TAG_CASE | re.DOTALL)


def remove_reasoning(text: str) -> str:
    """Stage 0: (a) closed blocks, then (b) an unclosed opener, then (c) orphan closers.

    Deliberately blind to JSON strings: a tag inside a string value is removed like any other.
    (a) is defined as one left-to-right regular-expression substitution of
    `<(think|reasoning)>.*?</\\1>`. That substitution is quadratic on a text of many unclosed
    openers, so (a) is done by a scan that stops at the first opener without a closer: every
    later block would be removed by the substitution too, but (b) then cuts at that opener
    anyway, so the result is the same (tests compare the two on random texts).
    """
    if "<" not in text:
        return text
    kept: list[str] = []
    position = 0
    while True:
        opener = _REASONING_OPEN.search(text, position)
        if opener is None:
            kept.append(text[position:])
            break
        closer = _REASONING_CLOSE[opener.group(1).lower()].search(text, opener.end())
        kept.append(text[position : opener.start()])
        if closer is None:
            # Keep the opener: (b) below cuts there, or earlier at one formed by a join.
            kept.append(opener.group(0))
            break
        position = closer.end()
    text = "".join(kept)
    # (b) works on what (a) left: the first opener there is unclosed, whatever follows it.
    opener = _REASONING_OPEN.search(text)
    if opener is not None:
        text = text[: opener.start()]
    # (c) the chat template pre-filled the opener: drop through the last orphan closer.
    through_last = _THROUGH_LAST_CLOSE.match(text)
    if through_last is not None:
        text = text[through_last.end() :]
    return text


# --- stage 2: first closed markdown fence ---------------------------------------------------


def first_fence_content(text: str) -> str | None:
    """Content of the first closed ``` fence, or None when the text has none.

    An opening fence is three backticks and the rest of that line (the info string, whatever
    it holds); the content runs from the next line to the next three backticks. Equivalent to
    the leftmost match of ```` ```[^\\n]*\\n(.*?)``` ```` (DOTALL): if the first backticks
    have no line break after them, or no backticks after that line break, no later opener
    has either. Three `find` calls keep this linear on any text.
    """
    opener = text.find("```")
    if opener == -1:
        return None
    line_end = text.find("\n", opener + 3)
    if line_end == -1:
        return None
    closer = text.find("```", line_end + 1)
    if closer == -1:
        return None
    return text[line_end + 1 : closer]


# --- stage 3: first balanced span that parses -----------------------------------------------


# The first opener that can begin a value is usually the answer: it is tried before the
# whole-text scan, with its own scan bounded to this many tokens. The patterns are those the
# whole-text scan applies with arrays (parsing.brackets).
_SHORTCUT_TOKENS = 1024
_OBJECT_TOKENS = re.compile(_STRING + r"|\{+|\}", re.DOTALL)
_ARRAY_TOKENS = re.compile(_STRING + r"|\[+|\]", re.DOTALL)
_VALUE_START = r'[-0-9"\[{tfn]'
_WS = r"[ \t\n\r]*"
_OBJECT_START = re.compile(
    r"\{(?=" + _WS + r'(?:\}|"(?:[^"\\]|\\.)*"' + _WS + ":" + _WS + _VALUE_START + "))",
    re.DOTALL,
)
_ARRAY_START = re.compile(r"\[(?=" + _WS + r"(?:\]|" + _VALUE_START + "))")
_SCANS = {"{": (_OBJECT_START, _OBJECT_TOKENS), "[": (_ARRAY_START, _ARRAY_TOKENS)}


def _first_start_span(text: str, opener: str) -> tuple[int, int] | None:
    """(first opener that can begin a value, its span's end or -1 when not closed within a
    bounded scan), or None when no opener can begin a value."""
    starts, tokens = _SCANS[opener]
    match = starts.search(text)
    if match is None:
        return None
    start = match.start()
    depth = 0
    for count, token in enumerate(tokens.finditer(text, start)):
        if count == _SHORTCUT_TOKENS:
            break
        first = token.start()
        char = text[first]
        if char == '"':
            continue
        if char == opener:
            depth += token.end() - first
            continue
        depth -= 1
        if depth == 0:
            return start, token.end()
    return start, -1


def _parse_span(candidate: str) -> tuple[Any, int]:
    """(value, -1) or (NOT_JSON, error position or -1); too deep is NOT_JSON, -1."""
    if candidate.count("[") + candidate.count("{") <= _SHALLOW_BRACKETS:
        return _scan_span(candidate)
    depth = json_depth(candidate)
    if depth > MAX_JSON_DEPTH:
        return NOT_JSON, -1
    return call_with_depth_headroom(depth, _scan_span, candidate)


# The first this many spans are parsed without the check for spans that surely fail: most
# texts stop within them, and the check costs passes over the whole text.
_UNCHECKED_SPANS = 64


def _in_batches(spans: Spans) -> Iterator[tuple[int, int, int]]:
    """The spans as Python ints, a growing batch at a time (most texts stop early); past the
    first _UNCHECKED_SPANS, only those that may parse (parsing.brackets.surely_failing)."""

    chosen = np.arange(min(_UNCHECKED_SPANS, len(spans.starts)))
    if len(spans.starts) > _UNCHECKED_SPANS:
        later = ~surely_failing(spans)
        later[:_UNCHECKED_SPANS] = False
        chosen = np.concatenate([chosen, np.flatnonzero(later)])
    done, batch = 0, 64
    while done < len(chosen):
        indices = chosen[done : done + batch]
        yield from zip(
            spans.starts[indices].tolist(),
            spans.ends[indices].tolist(),
            spans.readings[indices].tolist(),
            strict=True,
        )
        done, batch = done + batch, batch * 8


def _first_balanced(text: str, opener: str, closer: str) -> Any:
    """First balanced span, in text order of its opener, that parses as JSON.

    Only openers that can begin a value, with a closed span at most MAX_JSON_DEPTH levels of
    their kind deep, are tried (parsing.brackets finds them, for every opener at once).
    When a span fails at position k, a later opener before k of the same reading was read
    by that parse as the start of a value, and parsing it on its own follows the same path:
    if its span reaches past k it fails at k too, so it is skipped unparsed (nested failing
    spans would otherwise be parsed once per level). Spans that surely fail (a character or a
    pair of neighbours no JSON value holds) are skipped unparsed too, past the first few
    (runs of short failing spans would otherwise be parsed one by one).
    """
    first = _first_start_span(text, opener)
    if first is None:
        return NOT_JSON
    start, end = first
    if end != -1:
        value, _ = _parse_span(text[start:end])
        if value is not NOT_JSON:
            return value

    spans = balanced_spans(text, opener, closer, MAX_JSON_DEPTH)
    failed_at = failed_reading = -1
    for start, end, reading in _in_batches(spans):
        if reading == failed_reading and start < failed_at < end:
            continue
        value, error = _parse_span(text[start:end])
        if value is not NOT_JSON:
            return value
        if error >= 0:
            failed_at, failed_reading = start + error, reading
    return NOT_JSON


def first_balanced_object(text: str) -> Any:
    """The first structurally balanced `{…}` in text order that parses, else NOT_JSON."""
    if "{" not in text or "}" not in text:
        return NOT_JSON
    return _first_balanced(text, "{", "}")


def first_balanced_array(text: str) -> Any:
    """The first structurally balanced `[…]` in text order that parses, else NOT_JSON."""
    if "[" not in text or "]" not in text:
        return NOT_JSON
    return _first_balanced(text, "[", "]")


# --- stages 0–3 together --------------------------------------------------------------------


def _is_container(value: Any) -> bool:
    return type(value) is dict or type(value) is list


def compatible_candidate(raw: str) -> tuple[Any, str]:
    """docs/protocol.md §3.2 stages 0–3: (candidate object or array, stage) or (None, "invalid").

    The first stage yielding an object or array supplies the candidate; scalars fall through.
    """
    text = remove_reasoning(raw)
    value = loads_json(text.strip())
    if _is_container(value):
        return value, "strict"
    return _candidate_after_stage1(text)


def _candidate_after_stage1(text: str) -> tuple[Any, str]:
    content = first_fence_content(text)
    if content is not None:
        value = loads_json(content.strip())
        if _is_container(value):
            return value, "fence"
    value = first_balanced_object(text)
    if value is not NOT_JSON:
        return value, "balanced"
    value = first_balanced_array(text)
    if value is not NOT_JSON:
        return value, "balanced"
    return None, "invalid"


def candidate_with_parsed_stage1(raw: str, parsed_raw: Any) -> tuple[Any, str]:
    """compatible_candidate, reusing a parse of `raw.strip()` already done by strict mode."""
    text = remove_reasoning(raw)
    # Stage 0 returns the very same string when it had nothing to remove.
    value = parsed_raw if text is raw else loads_json(text.strip())
    if _is_container(value):
        return value, "strict"
    return _candidate_after_stage1(text)
