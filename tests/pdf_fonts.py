"""The type sizes a reader sees on the pages of a PDF that pdfTeX wrote uncompressed
(`\\pdfcompresslevel=0`): each `Tf` size times the scale of the transformation in force
(`cm`, as a scaled `\\resizebox` writes it, and the text matrix `Tm`). Enough of the PDF
content-stream syntax for pdfTeX's own output, no PDF library."""

from __future__ import annotations

import re

_STREAM = re.compile(rb"stream\r?\n(.*?)\r?\nendstream", re.S)
# Strings ((...) with escapes, <hex>), arrays' brackets, names, numbers, operators.
_TOKEN = re.compile(
    rb"\((?:\\.|[^\\)])*\)|<[0-9A-Fa-f\s]*>|\[|\]|/[^\s/\[\]()<>]+|[-+]?(?:\d+\.?\d*|\.\d+)|[A-Za-z'\"*]+"
)
Matrix = tuple[float, float, float, float, float, float]
IDENTITY: Matrix = (1.0, 0.0, 0.0, 1.0, 0.0, 0.0)


def _multiply(m: Matrix, n: Matrix) -> Matrix:
    a, b, c, d, e, f = m
    a2, b2, c2, d2, e2, f2 = n
    return (
        a * a2 + b * c2, a * b2 + b * d2, c * a2 + d * c2, c * b2 + d * d2,
        e * a2 + f * c2 + e2, e * b2 + f * d2 + f2,
    )  # fmt: skip


def _scale(m: Matrix) -> float:
    """The vertical scale of a matrix (the size a glyph's height is drawn at)."""
    return (m[2] ** 2 + m[3] ** 2) ** 0.5


def font_sizes(pdf: bytes) -> list[float]:
    """The effective size in pt of every font selection that shows text, in stream order."""
    sizes: list[float] = []
    for stream in _STREAM.findall(pdf):
        if b" Tf" not in stream:
            continue
        ctm, stack, tm, size = IDENTITY, [], IDENTITY, 0.0
        operands: list[bytes] = []
        for token in _TOKEN.findall(stream):
            if token[:1].isalpha() or token in (b"'", b'"'):
                op = token
                if op == b"q":
                    stack.append(ctm)
                elif op == b"Q" and stack:
                    ctm = stack.pop()
                elif op == b"cm" and len(operands) >= 6:
                    ctm = _multiply(tuple(map(float, operands[-6:])), ctm)  # type: ignore[arg-type]
                elif op == b"BT":
                    tm = IDENTITY
                elif op == b"Tm" and len(operands) >= 6:
                    tm = tuple(map(float, operands[-6:]))  # type: ignore[assignment]
                elif op == b"Tf" and operands:
                    size = float(operands[-1])
                elif op in (b"Tj", b"TJ", b"'", b'"') and size:
                    sizes.append(round(size * _scale(_multiply(tm, ctm)), 2))
                operands = []
            elif token not in (b"[", b"]") and token[:1] not in (b"(", b"<", b"/"):
                operands.append(token)
            elif token[:1] == b"/":
                operands.append(b"0")  # a font name: a placeholder before Tf's size
    return sizes
