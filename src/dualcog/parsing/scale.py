"""docs/protocol.md §3.3 run-level coordinate scale and the §3.2 stage-5 box transform."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from dualcog.parsing.fields import box_is_finite

NORM = "norm"
PER_MILLE = "per_mille"
PIXEL_640x480 = "pixel640x480"
AMBIGUOUS = "ambiguous"
CONFIGURABLE_SCALES = (NORM, PER_MILLE, PIXEL_640x480)
RUN_SCALES = (*CONFIGURABLE_SCALES, AMBIGUOUS)

PIXEL_WIDTH = 640.0
PIXEL_HEIGHT = 480.0


def is_scale_evidence(box: Sequence[float] | None) -> bool:
    """A recovered box counts for the scale when it is 4 finite non-negative numbers."""
    return box is not None and box_is_finite(box) and min(box) >= 0.0


def over_one(boxes: Iterable[Sequence[float]]) -> list[Sequence[float]]:
    """M of §3.3: the boxes whose largest coordinate is > 1."""
    return [box for box in boxes if max(box) > 1.0]


def resolve_run_scale(boxes: Iterable[Sequence[float]]) -> str:
    """§3.3 over every box recovered in one run (callers pass only scale evidence)."""
    evidence = [list(box) for box in boxes]
    large = over_one(evidence)
    if not large or 2 * len(large) < len(evidence):
        return NORM
    if all(
        x1 <= PIXEL_WIDTH and x2 <= PIXEL_WIDTH and y1 <= PIXEL_HEIGHT and y2 <= PIXEL_HEIGHT
        for x1, y1, x2, y2 in large
    ):
        return PIXEL_640x480
    if all(max(box) <= 1000.0 for box in large):
        return PER_MILLE
    return AMBIGUOUS


def apply_scale(box: list[float], scale: str) -> tuple[list[float] | None, bool]:
    """(scaled box or None when the scale leaves it invalid, rescaled?) — one rule per run."""
    if scale == NORM:
        return box, False
    if scale == PER_MILLE:
        return [c / 1000.0 for c in box], True
    if scale == PIXEL_640x480:
        x1, y1, x2, y2 = box
        return [x1 / PIXEL_WIDTH, y1 / PIXEL_HEIGHT, x2 / PIXEL_WIDTH, y2 / PIXEL_HEIGHT], True
    if scale == AMBIGUOUS:
        # Boxes in M cannot be interpreted; [0,1] boxes stay normalized.
        return (None, False) if max(box) > 1.0 else (box, False)
    raise ValueError(f"unknown bbox scale {scale!r}; expected one of {RUN_SCALES}")


def reorder_corners(box: list[float]) -> tuple[list[float], bool]:
    x1, y1, x2, y2 = box
    reordered = False
    if x1 > x2:
        x1, x2 = x2, x1
        reordered = True
    if y1 > y2:
        y1, y2 = y2, y1
        reordered = True
    return [x1, y1, x2, y2], reordered
