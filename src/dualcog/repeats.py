"""Repeats of a sampling model: `repeats: k` on a model makes k independent runs.

A model sent with a temperature above 0 answers differently each time it is asked, so one
run measures one draw. `repeats: k` (k > 1) turns its config entry into k runs named
`<name>~r1` ... `<name>~rk`: each flows through inference, parsing and scoring like any run,
with its own run name, so its own cache folder and cache keys (the name and the repeat index
are answer settings): no repeat is ever served another repeat's answer. `~` is refused in
configured names, so a repeat's name cannot collide with a configured run.

The tables and the leaderboard put a repeat set back into one row (`dualcog.tables.repeats`):
the mean over its repeats and the between-repeat standard deviation; paired comparisons
(`compare:`) of a repeat set average its repeats under the same bootstrap replicates.

This module imports nothing heavy: the Snakefile and the config loader use it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from dualcog.backends import backend_of, sampling_backends
from dualcog.errors import ConfigError

SEPARATOR = "~r"
# Config keys a repeat's entry gets: its index (an answer setting, like its name) and the
# model it repeats with the size of the set (neither changes an answer by itself).
REPEAT, REPEAT_OF, REPEATS = "repeat", "repeat_of", "repeats"
_REPEAT_NAME = re.compile(r"^(?P<base>.+)~r(?P<index>[1-9][0-9]*)$")


def repeat_name(base: str, index: int) -> str:
    return f"{base}{SEPARATOR}{index}"


def split_repeat_name(name: str) -> tuple[str, int] | None:
    """(base, index) of a repeat's run name; None for any other name."""
    found = _REPEAT_NAME.match(name)
    return (found["base"], int(found["index"])) if found else None


def expand_repeats(models: Iterable[Mapping[str, Any]], source: str) -> list[dict[str, Any]]:
    """The runs of `models`: an entry with `repeats: k > 1` becomes k entries, in place.

    A backend whose answers do not vary between runs (the registry's `Backend.samples`) is
    refused with repeats. An entry that is already a repeat (`repeat_of` set) is kept.
    """
    runs: list[dict[str, Any]] = []
    for model in models:
        count = int(model.get(REPEATS) or 1)
        if model.get(REPEAT_OF) or count == 1:
            runs.append(dict(model))
            continue
        if not backend_of(model).samples:
            can = ", ".join(sampling_backends())
            raise ConfigError(
                f"invalid configuration in {source}: models ({model['name']}).repeats: "
                f"backend {model.get('backend')} gives the same answers on every run, so "
                f"repeats: {count} would measure no sampling noise; repeats need a sampling "
                f"backend ({can}), or drop `repeats`"
            )
        label = model.get("display_name") or model["name"]
        for index in range(1, count + 1):
            runs.append(
                {
                    **model,
                    "name": repeat_name(model["name"], index),
                    "display_name": f"{label} (repeat {index}/{count})",
                    "repeat_label": label,
                    REPEAT: index,
                    REPEAT_OF: model["name"],
                }
            )
    return runs


def fold_sets(
    models: Iterable[Mapping[str, Any]], member: Callable[[Mapping[str, Any]], bool]
) -> list[tuple[dict[str, Any], Mapping[str, Any] | None]]:
    """`models` with each repeat set (the entries `member` accepts) in one entry at the place
    of its first repeat, named as configured and without the repeat keys; beside each entry,
    the first repeat it came from (None for a plain run)."""
    folded: list[tuple[dict[str, Any], Mapping[str, Any] | None]] = []
    seen: set[str] = set()
    for model in models:
        if not member(model):
            folded.append((dict(model), None))
            continue
        base = str(model[REPEAT_OF])
        if base in seen:
            continue
        seen.add(base)
        dropped = (REPEAT, REPEAT_OF, "repeat_label", "display_name")
        entry = {k: v for k, v in model.items() if k not in dropped}
        entry["name"] = base
        folded.append((entry, model))
    return folded


def made_by_expansion(model: Mapping[str, Any]) -> bool:
    """An entry `expand_repeats` made: its name says so (configured names hold no `~`), so a
    hand-written `repeat_of` stays for the schema to refuse."""
    base = model.get(REPEAT_OF)
    return bool(base) and split_repeat_name(str(model.get("name"))) == (base, model.get(REPEAT))


def fold_repeats(models: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """`models` with each expanded repeat set folded back into the entry it came from, so that
    a validated configuration validates again (a job re-reading the workflow's config)."""
    folded = []
    for entry, first in fold_sets(models, made_by_expansion):
        label = first.get("repeat_label") if first else None
        if label and label != entry["name"]:
            entry["display_name"] = label
        folded.append(entry)
    return folded


def repeat_sets(models: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Base name -> the run names of its configured repeats, in order (repeat sets only)."""
    sets: dict[str, list[str]] = {}
    for model in models:
        if model.get(REPEAT_OF):
            sets.setdefault(str(model[REPEAT_OF]), []).append(str(model["name"]))
    return sets


def run_seed(model: Mapping[str, Any]) -> int | str:
    """The seed a built-in backend draws from: the configured `seed`, and for a repeat that
    seed with the repeat index (so repeats draw differently and repeat 1 differs from a run
    without repeats, as a new run would)."""
    seed = int(model.get("seed", 0))
    index = model.get(REPEAT)
    return f"{seed}{SEPARATOR}{int(index)}" if index else seed
