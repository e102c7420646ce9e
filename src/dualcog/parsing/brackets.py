"""Stage 3's balanced spans of every opener at once, in array operations (linear in the text).

A scan from an opener reads the text from there as JSON strings (backslash escapes; an
unterminated string runs to the end of the text) and, outside them, the brackets of one kind;
the opener's span ends at the closer that brings the scan's depth back to zero. Doing that
scan per opener is a Python-level step per bracket and quadratic on nested openers; here every
opener's span comes from a few numpy passes, with the same result.

Only quotes decide what is inside a string. A quote with an odd run of backslashes before it
is *escaped*: inside a string it does not close it, outside it opens one (the backslashes are
plain text there), so after it every scan is inside a string. Any other quote toggles. So a
scan from any opener reads either like the scan from the text's start (G, when G is outside a
string there), or, when G is inside one, exactly the other way round until the next escaped
quote, and like G after it (A). Matching brackets within one reading is a matter of levels:
an opener and its closer have the same level (depth after an opener, before a closer), and at
one level openers and closers alternate, so after a stable sort by level each opener's closer
is the next token.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

_QUOTE, _BACKSLASH = ord('"'), ord("\\")


def _depth_type(size: int) -> type[np.signedinteger]:
    # Running depths of a text under 2**31 characters fit in 32 bits (half the memory traffic).
    return np.int32 if size < 2**31 else np.int64


def _index_type(size: int) -> type[np.signedinteger]:
    return np.int32 if size < 2**31 - 2 else np.int64


def _character_table(characters: str) -> np.ndarray:
    table = np.zeros(128, dtype=bool)
    table[list(map(ord, characters))] = True
    return table


def _table(table: np.ndarray, codes: np.ndarray) -> np.ndarray:
    # Every character the tables mark is ASCII; all others read as DEL (127), marked by none.
    return np.take(table, codes, mode="clip")


_WHITESPACE = _character_table(" \t\n\r")
# After `{` and whitespace: `}`, or a key string, whitespace, `:`, whitespace and this.
_VALUE_START = _character_table('-0123456789"[{tfn')
# After `[` and whitespace: `]` or the first character of a value.
_ARRAY_NEXT = _character_table(']-0123456789"[{tfn')
_EMPTY_OBJECT_END = _character_table("}")
_QUOTE_ONLY = _character_table('"')
_COLON = _character_table(":")


def code_points(text: str) -> np.ndarray:
    """The text's characters as integers, one per `str` index."""
    if text.isascii():
        return np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    # surrogatepass: a lone surrogate (kept losslessly from replayed records) is one unit too.
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


def _stable_order_by(levels: np.ndarray) -> np.ndarray:
    """Indices that sort `levels` stably, by two 16-bit radix passes (linear time)."""
    shifted = (levels - levels.min()).astype(np.uint32) if len(levels) else levels
    if len(levels) == 0 or int(shifted.max()) < 1 << 16:
        return np.argsort(shifted.astype(np.uint16), kind="stable")
    low = np.argsort((shifted & 0xFFFF).astype(np.uint16), kind="stable")
    high = np.argsort((shifted[low] >> 16).astype(np.uint16), kind="stable")
    return low[high]


@dataclass(slots=True)
class _Reading:
    """The bracket tokens of one reading, with levels, sorted by (level, position)."""

    positions: np.ndarray  # token positions in text order
    depth_after: np.ndarray  # running depth after each token (text order)
    closer: np.ndarray  # per token: index of the opener's closer, or -1 (closers: -1)
    order: np.ndarray  # token indices sorted by (level, position)
    sorted_levels: np.ndarray
    min_level: int
    stride: int
    # (level - min level) * stride + position, ascending, and the positions in that order:
    # only deep spans and spans read inside strings search by level, so built on first use
    # (at 16 MiB they are two arrays of 8 bytes per token).
    _keys: np.ndarray | None = None
    _sorted_positions: np.ndarray | None = None

    def _by_level(self) -> tuple[np.ndarray, np.ndarray]:
        if self._keys is None or self._sorted_positions is None:
            self._sorted_positions = self.positions[self.order]
            levels = self.sorted_levels.astype(np.int64) - self.min_level
            self._keys = levels * self.stride + self._sorted_positions
        return self._keys, self._sorted_positions

    def first_at_level(self, levels: np.ndarray, after: np.ndarray) -> np.ndarray:
        """Position of the first token at `levels[i]` past `after[i]`, or -1."""
        if len(self.order) == 0:
            return np.full(len(levels), -1, dtype=np.int64)
        keys, sorted_positions = self._by_level()
        offset = levels.astype(np.int64) - self.min_level
        query = np.maximum(offset, 0) * self.stride + after + 1
        index = np.searchsorted(keys, query)
        inside = np.minimum(index, len(keys) - 1)
        found = (index < len(keys)) & (offset >= 0) & (self.sorted_levels[inside] == levels)
        return np.where(found, sorted_positions[inside], -1)

    def ends(self, tokens: np.ndarray) -> np.ndarray:
        """One past the closer of each opener token, or -1."""
        closer = self.closer[tokens]
        return np.where(closer >= 0, self.positions[np.maximum(closer, 0)] + 1, -1)


def _steps(opens: np.ndarray, depth: type[np.signedinteger]) -> np.ndarray:
    """+1 per opener, -1 per closer, in the depth type (no 8-byte temporary)."""
    return np.where(opens, depth(1), depth(-1))


def _reading(positions: np.ndarray, opens: np.ndarray, stride: int) -> _Reading:
    depth = _depth_type(stride)
    depth_after = np.cumsum(_steps(opens, depth), dtype=depth)
    levels = np.where(opens, depth_after, depth_after + 1)
    order = _stable_order_by(levels)
    sorted_levels = levels[order]
    sorted_closer = np.full(len(order), -1, dtype=_index_type(len(order)))
    if len(order) > 1:
        closes = opens[order][:-1] & (sorted_levels[1:] == sorted_levels[:-1])
        sorted_closer[:-1][closes] = order[1:][closes]
    closer = np.empty_like(sorted_closer)
    closer[order] = sorted_closer
    min_level = int(sorted_levels[0]) if len(order) else 0
    return _Reading(positions, depth_after, closer, order, sorted_levels, min_level, stride)


def _escaped_quotes(codes: np.ndarray, quotes: np.ndarray) -> np.ndarray:
    """Whether each quote has an odd run of backslashes right before it."""
    backslashes = np.flatnonzero(codes == _BACKSLASH)
    if len(backslashes) == 0 or len(quotes) == 0:
        return np.zeros(len(quotes), dtype=bool)
    new_run = np.ones(len(backslashes), dtype=bool)
    new_run[1:] = backslashes[1:] != backslashes[:-1] + 1
    run_start = backslashes[
        np.maximum.accumulate(np.where(new_run, np.arange(len(backslashes)), 0))
    ]
    before = quotes - 1
    index = np.minimum(np.searchsorted(backslashes, before), len(backslashes) - 1)
    hit = backslashes[index] == before
    return hit & ((before - run_start[index]) % 2 == 0)


def _inside_after_quotes(escaped: np.ndarray) -> np.ndarray:
    """Whether the scan from the text's start is inside a string just after each quote."""
    toggles = np.cumsum(~escaped)
    indices = np.arange(len(escaped))
    last_escaped = np.maximum.accumulate(np.where(escaped, indices, -1))
    since = toggles - np.where(last_escaped >= 0, toggles[np.maximum(last_escaped, 0)], 0)
    return np.where(last_escaped >= 0, since % 2 == 0, since % 2 == 1)


@dataclass(frozen=True, slots=True)
class _Strings:
    """The main reading's strings: its quotes, which are escaped, whether inside after each."""

    quotes: np.ndarray
    escaped: np.ndarray
    inside_after: np.ndarray

    def inside(self, positions: np.ndarray) -> np.ndarray:
        """Whether each (non-quote) position is inside a string of the main reading."""
        if len(self.quotes) == 0:
            return np.zeros(len(positions), dtype=bool)
        last_quote = np.searchsorted(self.quotes, positions) - 1
        return (last_quote >= 0) & self.inside_after[np.maximum(last_quote, 0)]


def _main_strings(codes: np.ndarray) -> _Strings:
    quotes = np.flatnonzero(codes == _QUOTE)
    escaped = _escaped_quotes(codes, quotes)
    inside_after = _inside_after_quotes(escaped) if len(quotes) else escaped
    return _Strings(quotes, escaped, inside_after)


_BRACKET_CODES = tuple(map(ord, "[]{}"))


def deepest_nesting(text: str) -> int:
    """Deepest nesting of `[`/`{` against `]`/`}` outside strings, read from the start."""
    codes = code_points(text)
    is_bracket = codes == _BRACKET_CODES[0]
    for code in _BRACKET_CODES[1:]:
        is_bracket |= codes == code
    positions = np.flatnonzero(is_bracket)
    if len(positions) == 0:
        return 0
    in_string = _main_strings(codes).inside(positions)
    brackets = codes[positions[~in_string]]
    if len(brackets) == 0:
        return 0
    # `[` and `{` (0x5B, 0x7B) have bit 0x02 set; `]` and `}` (0x5D, 0x7D) have it clear.
    depth = _depth_type(len(codes))
    steps = (brackets & 2).astype(depth) - 1
    return max(0, int(np.cumsum(steps, dtype=depth).max()))


def _next_in(sorted_positions: np.ndarray, after: np.ndarray) -> np.ndarray:
    """The first of `sorted_positions` past `after[i]`, or -1."""
    if len(sorted_positions) == 0:
        return np.full(len(after), -1, dtype=np.int64)
    index = np.searchsorted(sorted_positions, after + 1)
    found = index < len(sorted_positions)
    return np.where(found, sorted_positions[np.minimum(index, len(sorted_positions) - 1)], -1)


@dataclass(frozen=True, slots=True)
class Spans:
    """Openers that can begin a value, with a closed span at most `max_height` levels deep.

    Text order. `readings` is 0 for openers read like the scan from the text's start, r + 1
    for those read the other way round up to the r-th escaped quote: a later opener of the
    same reading lies outside strings for the scan of an earlier one.
    """

    starts: np.ndarray
    ends: np.ndarray
    readings: np.ndarray
    # What the scan learnt of the text, for surely_failing.
    codes: np.ndarray = field(repr=False, compare=False)
    strings: _Strings = field(repr=False, compare=False)
    escaped_at: np.ndarray = field(repr=False, compare=False)


def balanced_spans(text: str, opener: str, closer: str, max_height: int) -> Spans:
    codes = code_points(text)
    size = len(codes)
    stride = size + 2
    opener_code, closer_code = ord(opener), ord(closer)
    # A span this many tokens long or shorter cannot be more than max_height levels deep.
    deep_tokens = 2 * (max_height + 1)

    is_opener = codes == opener_code
    # Token positions in 4 bytes where they fit: at 16 MiB every array per token counts.
    positions = np.flatnonzero(is_opener | (codes == closer_code)).astype(_index_type(size))
    opens = is_opener[positions]
    strings = _main_strings(codes)
    in_string = strings.inside(positions)
    escaped_at = strings.quotes[strings.escaped]
    is_start = _value_starts(codes, is_opener, opener_code, strings.quotes[~strings.escaped])
    is_start = is_start[positions]

    # The main reading without its openers that never close (nothing after them falls back
    # to their depth): they are no candidates, and every other token keeps its match.
    in_main = ~in_string
    main_opens = opens[in_main]
    depth = _depth_type(size)
    depth_after = np.cumsum(_steps(main_opens, depth), dtype=depth)
    if len(depth_after):
        lowest_later = np.empty_like(depth_after)
        lowest_later[:-1] = np.minimum.accumulate(depth_after[:0:-1])[::-1]
        lowest_later[-1] = depth_after[-1]
        in_main[in_main] = ~main_opens | (lowest_later < depth_after)
    main = _reading(positions[in_main], opens[in_main], stride)
    tokens = np.flatnonzero(is_start[in_main])
    closers = main.closer[tokens]
    tokens, closers = tokens[closers >= 0], closers[closers >= 0]
    starts = main.positions[tokens]
    ends = main.positions[closers] + 1
    long = np.flatnonzero(closers - tokens + 1 >= deep_tokens)
    deep = np.zeros(len(tokens), dtype=bool)
    deep[long] = _reaches(
        main, main.depth_after[tokens[long]] + max_height, starts[long], ends[long]
    )
    starts, ends = starts[~deep], ends[~deep]
    readings = np.zeros(len(starts), dtype=np.int64)

    if is_start[in_string].any():
        other = _reading(positions[in_string], opens[in_string], stride)
        tokens = np.flatnonzero(is_start[in_string])
        at = other.positions[tokens]
        region_end = _next_in(escaped_at, at)
        region_end[region_end < 0] = size
        level = other.depth_after[tokens]
        other_ends = other.ends(tokens)
        other_ends[other_ends - 1 >= region_end] = -1
        # How deep the scan reaches before the escaped quote: levels above the opener's.
        bound = np.minimum(np.where(other_ends == -1, size, other_ends), region_end)
        too_deep = _reaches(other, level + max_height, at, bound)
        # Unclosed at the escaped quote: from there the scan reads like the main reading.
        carry = np.flatnonzero((other_ends == -1) & (region_end < size))
        if len(carry):
            end_of_region = region_end[carry]
            last_other = np.searchsorted(other.positions, end_of_region) - 1
            still_open = other.depth_after[last_other] - (level[carry] - 1)
            last_main = np.searchsorted(main.positions, end_of_region) - 1
            main_depth = np.zeros(len(carry), dtype=np.int64)
            if len(main.positions):
                main_depth = np.where(last_main >= 0, main.depth_after[np.maximum(last_main, 0)], 0)
            closer_at = main.first_at_level(main_depth - still_open + 1, end_of_region)
            carried_ends = np.where(closer_at >= 0, closer_at + 1, -1)
            other_ends[carry] = carried_ends
            too_deep[carry] |= (still_open <= max_height) & _reaches(
                main, main_depth + max_height + 1 - still_open, end_of_region, carried_ends
            )
        keep = (other_ends != -1) & ~too_deep
        region = np.searchsorted(escaped_at, at[keep])
        starts = np.concatenate([starts, at[keep]])
        ends = np.concatenate([ends, other_ends[keep]])
        readings = np.concatenate([readings, region + 1])
        order = np.argsort(starts, kind="stable")
        starts, ends, readings = starts[order], ends[order], readings[order]
    return Spans(starts, ends, readings, codes, strings, escaped_at)


def _reaches(
    reading: _Reading, levels: np.ndarray, after: np.ndarray, before: np.ndarray
) -> np.ndarray:
    """Whether a token at `levels[i]` lies between `after[i]` and `before[i]` (exclusive).

    Depth changes one step at a time, so a scan that goes as deep as a level meets a token
    at exactly that level.
    """
    first = reading.first_at_level(levels, after)
    return (first >= 0) & ((before == -1) | (first < before))


class _Following:
    """The first non-whitespace character after given positions (most are the next one)."""

    def __init__(self, codes: np.ndarray) -> None:
        self.codes = codes
        self._non_whitespace: np.ndarray | None = None

    def position(self, after: np.ndarray) -> np.ndarray:
        """Position of the first non-whitespace character past `after[i]`, or -1."""
        codes = self.codes
        following = np.minimum(after + 1, len(codes))
        result = np.full(len(after), -1, dtype=np.int64)
        in_text = following < len(codes)
        blank = _table(_WHITESPACE, codes[np.minimum(following, len(codes) - 1)])
        direct = in_text & ~blank
        result[direct] = following[direct]
        farther = np.flatnonzero(in_text & blank)
        if len(farther):
            if self._non_whitespace is None:
                self._non_whitespace = np.flatnonzero(~_table(_WHITESPACE, codes))
            result[farther] = _next_in(self._non_whitespace, after[farther])
        return result

    def is_one_of(self, table: np.ndarray, at: np.ndarray) -> np.ndarray:
        """Whether the character at each position (-1: none) is one the table marks."""
        found = at >= 0
        return found & _table(table, self.codes[np.maximum(at, 0)]) if len(at) else found


def _value_starts(
    codes: np.ndarray, is_opener: np.ndarray, opener_code: int, closing_quotes: np.ndarray
) -> np.ndarray:
    """Where in the text an opener can begin a JSON object or array: `{`, optional whitespace,
    then `}` or a key string, `:` and the first character of a value; `[` then `]` or a value.
    """
    following = _Following(codes)
    starts = np.zeros(len(codes), dtype=bool)
    head, next_codes = is_opener[:-1], codes[1:]
    # Most openers are followed by a character that decides; the others skip whitespace.
    spaced = np.flatnonzero(head & _table(_WHITESPACE, next_codes))
    after = following.position(spaced)
    if opener_code == ord("["):
        starts[:-1] = head & _table(_ARRAY_NEXT, next_codes)
        starts[spaced] = following.is_one_of(_ARRAY_NEXT, after)
        return starts
    starts[:-1] = head & _table(_EMPTY_OBJECT_END, next_codes)
    starts[spaced] = following.is_one_of(_EMPTY_OBJECT_END, after)
    # A key string: from its quote to the next quote that is not escaped.
    direct = np.flatnonzero(head & _table(_QUOTE_ONLY, next_codes))
    far = following.is_one_of(_QUOTE_ONLY, after)
    keyed = np.concatenate([direct, spaced[far]])
    if len(keyed):
        key_end = _next_in(closing_quotes, np.concatenate([direct + 1, after[far]]))
        colon = np.where(key_end >= 0, following.position(key_end), -1)
        colon_ok = following.is_one_of(_COLON, colon)
        value = np.where(colon_ok, following.position(colon), -1)
        starts[keyed[following.is_one_of(_VALUE_START, value)]] = True
    return starts


# --- spans that surely fail to parse --------------------------------------------------------

# What a JSON text holds outside its strings (the quote opens one): whitespace, structure,
# numbers (`-+.eE`, digits) and the letters of `true`, `false`, `null`.
_BAD_OUTSIDE_STRINGS = ~_character_table(' \t\n\r{}[]:,"0123456789-+.eEtruefalsn')


_DIGITS = "0123456789"
_ENDS = ",]}"  # what follows a number or literal that ends


def _wrong_pairs(spaced: bool) -> np.ndarray:
    """Flat 256 x 256 table, [before << 8 | after]: whether `after` cannot be the next
    non-whitespace character after `before` outside strings, `spaced` telling whether
    whitespace stands between them. Structural characters limit what follows either way;
    inside a number or literal the next character continues it (`true`, `false`, `null`,
    digits, `.`, exponent), and once whitespace ends one only `,`, `]` or `}` can come.
    Quotes and characters bad outside strings limit nothing here."""
    rows = {",": _VALUE_START, ":": _VALUE_START, "[": _ARRAY_NEXT}
    rows |= {"{": _character_table('"}'), "}": _character_table(_ENDS)}
    rows["]"] = rows["}"]
    if spaced:
        scalar = {character: "" for character in _DIGITS + "-+.eEtrufalsn"}
    else:
        scalar = {character: _DIGITS + ".eE" for character in _DIGITS}
        scalar |= {
            "-": _DIGITS,
            "+": _DIGITS,
            ".": _DIGITS,
            "e": _DIGITS + "+-",
            "E": _DIGITS + "+-",
        }
        scalar |= {"t": "r", "r": "u", "u": "el", "f": "a", "a": "l", "l": "sl", "s": "e", "n": "u"}
    for character, more in scalar.items():
        # `e` ends `true` and `false`, `l` ends `null`; a number ends anywhere but after a sign,
        # point or exponent (those need a digit next).
        ends = character in _DIGITS + "el" or spaced
        rows[character] = _character_table(more + (_ENDS if ends else ""))
    table = np.zeros((256, 256), dtype=bool)
    for before, allowed in rows.items():
        table[ord(before)] = ~np.concatenate([allowed, np.zeros(128, dtype=bool)])
    return table.ravel()


_WRONG_ADJACENT = _wrong_pairs(spaced=False)
_WRONG_SPACED = _wrong_pairs(spaced=True)
# What can stand right before a digit in a number; before it anything else, a `0` begins one,
# and a number's first digit 0 is its only digit before a point or exponent.
_NUMBER_BEFORE_DIGIT = _character_table(_DIGITS + ".eE+-")
_IS_DIGIT = _character_table(_DIGITS)


def _inside_everywhere(strings: _Strings, size: int) -> np.ndarray:
    """Per position, whether it is inside a string of the main reading (a quote: after it)."""
    quotes = strings.quotes
    if len(quotes) == 0:
        return np.zeros(size, dtype=bool)
    states = np.concatenate([[False], strings.inside_after])
    return np.repeat(states, np.diff(quotes, prepend=0, append=size))


def surely_failing(spans: Spans) -> np.ndarray:
    """Whether each span surely fails to parse as one JSON value, decided without parsing.

    A span fails when, as the scan from its opener reads the text, it holds past its opener
    a character no JSON text has outside strings (any letter but those of `true`, `false`,
    `null` and exponents, a backslash, non-ASCII), a control character inside a string, or a
    structural character followed (after whitespace) by one that cannot come next in JSON
    (`,` or `:` then no value, `[` then no value or `]`, `{` then no key or `}`, `}` or `]`
    then no `,`, `}` or `]`; a closer ends the span, so its follower is inside it only when
    the closer is nested), or a number or literal misspelt as far as neighbours tell (`tru]`,
    `1 2`, `1.]`, `-]`, a leading zero, `nul`). A span that parses is read by the decoder as
    its scan reads it (outside strings there is no backslash, so every quote there opens or
    closes a string as in the scan), and none of these occurs in valid JSON. Not caught, so
    parsed: faults only a longer context shows (`nulll`, `"a" "b"`, a bad escape, `[1}`).
    Linear: a few passes over the text, a search per span.
    """
    codes = spans.codes
    size = len(codes)
    # Every character the tables mark is ASCII; the others read as DEL (127), like _table.
    small = codes if codes.dtype == np.uint8 else np.minimum(codes, 127).astype(np.uint8)
    inside = _inside_everywhere(spans.strings, size)
    # Marks of what fails a span, under the main reading (bad outside strings where it is
    # outside, bad inside where inside) and the other way round; in place, the text is long.
    bad_main = _table(_BAD_OUTSIDE_STRINGS, small)
    bad_other = small < 0x20
    differ = bad_main ^ bad_other
    differ &= inside
    bad_main ^= differ
    bad_other ^= differ
    # Pairs of neighbours, whitespace left out: marked at the second, under the reading
    # that puts the first outside strings.
    blank = _table(_WHITESPACE, small)
    kept = adjacent = None
    sequence = small
    if blank.any():
        filled = ~blank
        kept = np.flatnonzero(filled)
        sequence = small[kept]
        # Whether each kept character's next one is kept too (no 8-byte differences).
        adjacent = filled[1:][filled[:-1]][: len(kept) - 1]
    pairs = sequence[:-1].astype(np.uint16)
    pairs <<= 8
    pairs |= sequence[1:]
    # Per pair of neighbours (index i: sequence[i], sequence[i + 1]) whether it is wrong;
    # boolean masks throughout, the text is long.
    wrong = np.take(_WRONG_ADJACENT, pairs)
    if adjacent is not None:
        spaced = np.flatnonzero(~adjacent)
        wrong[spaced] = np.take(_WRONG_SPACED, pairs[spaced])
    if len(sequence) > 2:
        # A leading zero: `0`, right after it a digit, and right before it nothing that can
        # come before a digit in a number (index i: the `0` is sequence[i + 1]).
        zero = (sequence[1:-1] == ord("0")) & _table(_IS_DIGIT, sequence[2:])
        begins = ~_table(_NUMBER_BEFORE_DIGIT, sequence[:-2])
        # `nul` ends: after `ul` only a second `l`, right after it.
        nul = (sequence[:-2] == ord("u")) & (sequence[1:-1] == ord("l"))
        ended = sequence[2:] != ord("l")
        if adjacent is not None:
            zero &= adjacent[1:]
            begins |= ~adjacent[:-1]
            nul &= adjacent[:-1]
            ended |= ~adjacent[1:]
        wrong[1:] |= zero & begins
        wrong[1:] |= nul & ended
    # Marked at the second of a wrong pair, under the reading that puts the first outside.
    first_inside = inside[:-1] if kept is None else inside[kept[:-1]]
    wrong_main = wrong & ~first_inside
    wrong &= first_inside
    if kept is None:
        bad_main[1:] |= wrong_main
        bad_other[1:] |= wrong
    else:
        bad_main[kept[1:][wrong_main]] = True
        bad_other[kept[1:][wrong]] = True
    main_marks, other_marks = np.flatnonzero(bad_main), np.flatnonzero(bad_other)

    starts, ends, readings = spans.starts, spans.ends, spans.readings
    first_main = _next_in(main_marks, starts)
    failing = (first_main >= 0) & (first_main < ends)
    other = np.flatnonzero(readings > 0)
    if len(other):
        # Read the other way round up to the next escaped quote, like the main reading after.
        region_ends = np.append(spans.escaped_at, size)[readings[other] - 1]
        first_other = _next_in(other_marks, starts[other])
        before = np.minimum(ends[other], region_ends + 1)
        first_main = _next_in(main_marks, region_ends)
        failing[other] = ((first_other >= 0) & (first_other < before)) | (
            (first_main >= 0) & (first_main < ends[other])
        )
    return failing
