"""Text-level JSON recovery shared by the parse modes (PROTOCOL §3, §3.2 stages 0–3).

Everything here is pure string work: RFC 8259 loading, reasoning-tag removal, the first
markdown fence, and the first balanced `{…}` / `[…]` that parses. No function raises on any
input text.
"""

from __future__ import annotations

import json
import re
from typing import Any


class _NotJson:
    """Sentinel for "this text is not one JSON value" (JSON `null` is a valid result)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NOT_JSON"


NOT_JSON: Any = _NotJson()


def _reject_constant(name: str) -> Any:
    # RFC 8259 has no NaN / Infinity tokens; Python's json accepts them unless told not to.
    raise ValueError(f"non-RFC-8259 constant {name}")


# Python's decoder already lets the last duplicate key win and rejects control characters
# inside strings (strict=True), which is what RFC 8259 parsing means for this protocol.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


_SCAN_ONCE = _DECODER.scan_once
_JSON_WHITESPACE = " \t\n\r"

# Decision: a value nested deeper than this is treated as not parsing. Python's own limit is
# a RecursionError whose depth depends on the caller's stack, which would make the result
# depend on where the parser is called from.
MAX_JSON_DEPTH = 200

# A JSON string (backslash escapes honoured; an unterminated one runs to the end of the text).
_STRING = r'"(?:[^"\\]+|\\.)*(?:"|\\?\Z)'
_NESTING_TOKENS = re.compile(_STRING + r"|[\[\]{}]", re.DOTALL)


def _too_deep(text: str) -> bool:
    # Counting brackets is C-speed; only texts with many of them get the string-aware scan.
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
        return False
    depth = 0
    for match in _NESTING_TOKENS.finditer(text):
        char = text[match.start()]
        if char == "[" or char == "{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                return True
        elif char == "]" or char == "}":
            depth -= 1
    return False


def loads_json(text: str) -> Any:
    """Parse `text` as exactly one RFC 8259 JSON value, or return NOT_JSON."""
    if _too_deep(text):
        return NOT_JSON
    try:
        if text and text[0] not in _JSON_WHITESPACE:
            # What JSONDecoder.decode does, minus its Python-level whitespace handling.
            value, end = _SCAN_ONCE(text, 0)
            if end == len(text) or not text[end:].strip(_JSON_WHITESPACE):
                return value
            return NOT_JSON
        return _DECODER.decode(text)
    except (ValueError, RecursionError, StopIteration):
        # ValueError covers JSONDecodeError, rejected constants and over-long integers;
        # StopIteration is the scanner's "no value here".
        return NOT_JSON


# --- stage 0: reasoning removal -------------------------------------------------------------

_REASONING_OPEN = re.compile(r"<(think|reasoning)>", re.IGNORECASE)
_REASONING_CLOSE = {
    "think": re.compile(r"</think>", re.IGNORECASE),
    "reasoning": re.compile(r"</reasoning>", re.IGNORECASE),
}
# Greedy prefix: the match ends at the last closing tag.
_THROUGH_LAST_CLOSE = re.compile(r".*</(?:think|reasoning)>", re.IGNORECASE | re.DOTALL)


def remove_reasoning(text: str) -> str:
    """PROTOCOL §3.2 stage 0: (a) closed blocks, (b) an unclosed opener, (c) orphan closers.

    Deliberately blind to JSON strings: a tag inside a string value is removed like any other.
    """
    if "<" not in text:
        return text
    # (a) left to right, each block ends at the first closing tag of its own name (no
    # nesting). An opener without such a closer survives (a), so (b) cuts there: stop.
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
            break
        position = closer.end()
    text = "".join(kept)
    # (b) an opener still present (formed where removed blocks joined) is unclosed too.
    opener = _REASONING_OPEN.search(text)
    if opener is not None:
        text = text[: opener.start()]
    # (c) the chat template pre-filled the opener: drop through the last orphan closer.
    through_last = _THROUGH_LAST_CLOSE.match(text)
    if through_last is not None:
        text = text[through_last.end() :]
    return text


# --- stage 2: first closed markdown fence ---------------------------------------------------

_FENCE = re.compile(r"```(.*?)```", re.DOTALL)
# An info string ("json", "JSON5", "python") directly after the opening backticks, ended by
# the line end or directly followed by the JSON value on the same line.
_FENCE_LANG = re.compile(r"[ \t]*[A-Za-z][\w+.#-]*(?:[ \t]*(?:\r?\n|\Z)|(?=[ \t]*[{\[]))")


def first_fence_content(text: str) -> str | None:
    """Content of the first closed ``` fence, its language tag removed; None if no fence."""
    if "```" not in text:
        return None
    match = _FENCE.search(text)
    if match is None:
        return None
    content = match.group(1)
    lang = _FENCE_LANG.match(content)
    if lang is not None:
        content = content[lang.end() :]
    return content


# --- stage 3: first balanced span that parses -----------------------------------------------

# Tokens that matter for balance: a JSON string or one bracket of the kind being matched.
_OBJECT_TOKENS = re.compile(_STRING + r"|[{}]", re.DOTALL)
_ARRAY_TOKENS = re.compile(_STRING + r"|[\[\]]", re.DOTALL)


def _closing_positions(
    text: str, start: int, tokens: re.Pattern[str], opener: str
) -> dict[int, tuple[int, int]]:
    """Scan from the opener at `start`; map every opener met to (span end or -1, height).

    Openers nested inside the span are tokenised identically when scanned on their own, so
    one pass records their matches too (keeps the search linear on ordinary text). The
    height (nesting levels of this bracket kind) lets over-deep spans be skipped unparsed.
    """
    spans: dict[int, tuple[int, int]] = {}
    stack: list[list[int]] = []  # [position, height of the deepest child so far]
    for match in tokens.finditer(text, start):
        char = text[match.start()]
        if char == '"':
            continue
        if char == opener:
            stack.append([match.start(), 0])
        else:
            if not stack:
                break
            position, child_height = stack.pop()
            height = child_height + 1
            spans[position] = (match.end(), height)
            if not stack:
                break
            if height > stack[-1][1]:
                stack[-1][1] = height
    for position, _ in stack:
        spans[position] = (-1, 0)
    return spans


def _first_balanced(text: str, opener: str, tokens: re.Pattern[str]) -> Any:
    known: dict[int, tuple[int, int]] = {}
    start = text.find(opener)
    while start != -1:
        span = known.get(start)
        if span is None:
            known.update(_closing_positions(text, start, tokens, opener))
            span = known[start]
        end, height = span
        if end != -1 and height <= MAX_JSON_DEPTH:
            value = loads_json(text[start:end])
            if value is not NOT_JSON:
                return value
        start = text.find(opener, start + 1)
    return NOT_JSON


def first_balanced_object(text: str) -> Any:
    """The first structurally balanced `{…}` in text order that parses, else NOT_JSON."""
    if "{" not in text:
        return NOT_JSON
    return _first_balanced(text, "{", _OBJECT_TOKENS)


def first_balanced_array(text: str) -> Any:
    """The first structurally balanced `[…]` in text order that parses, else NOT_JSON."""
    if "[" not in text:
        return NOT_JSON
    return _first_balanced(text, "[", _ARRAY_TOKENS)


# --- stages 0–3 together --------------------------------------------------------------------


def _is_container(value: Any) -> bool:
    return type(value) is dict or type(value) is list


def compatible_candidate(raw: str) -> tuple[Any, str]:
    """PROTOCOL §3.2 stages 0–3: (candidate object or array, stage) or (None, "invalid").

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
