"""Render one model run's explorer: a page with the sample index, and card chunks beside it.

Layout under the explorer folder (all relative, so the folder works offline and moved whole):
  <model>.html             CSS, script and the compact filter index inlined
  data/<model>/cNNNNN.js   pre-rendered sample cards, CHUNK_SIZE per file, loaded per page
  media/...                thumbnails and frame grids shared by all models (explorer.media)
Chunk numbers follow the benchmark's sample order, the same for every model, so the compare
view loads the same chunk of a second model.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import jinja2.ext

from dualcog.explorer.records import RAW_TEXT_LIMIT
from dualcog.schemas import OUTCOME_TITLES, OUTCOMES
from dualcog.stamp import stamp_rows
from dualcog.tasks import (
    IMAGE_DIFFICULTIES,
    IMAGE_DUAL_FAMILIES,
    REQUEST_KINDS,
    SCORED_BY_TASK,
    TASK_ABBREVIATIONS,
    VIDEO_DIFFICULTIES,
)

CHUNK_SIZE = 25
PAGE_SIZE = 20
# Stated limits at paper scale (4,096 image + 2,048 video samples; docs/explorer.md): the page
# a browser opens, and each card chunk it loads (a view loads at most PAGE_SIZE chunks).
PAGE_BYTES_LIMIT = 150_000
CHUNK_BYTES_LIMIT = 250_000
STAGES = ("strict", "fence", "balanced", "keys", "invalid", "missing")
LEVEL_TITLES = {"composite": "Composite level", "atomic": "Atomic level",
                "visibility": "Visibility segments"}  # fmt: skip
BOX_TITLES = {"gold": "gold", "pred": "predicted", "scored-against": "chosen candidate's box"}
VIDEO_FAMILY = ("behavior", "landmark_visibility")


class _RecordEnvironment(jinja2.Environment):
    """Looks `r.task` up as a key first: the records are dicts, and Jinja's default (attribute
    first, then key) pays a failed attribute lookup for each of the ~700k fields rendered."""

    def getattr(self, obj: Any, attribute: str) -> Any:
        if type(obj) is dict and attribute in obj:
            return obj[attribute]
        return super().getattr(obj, attribute)


class _CollapseNewlines(jinja2.ext.Extension):
    """Template source: a line break and the indentation around it become one space.

    Same rendering (HTML collapses such whitespace; `<pre>` content only comes from values,
    never from template text), and about 5 % fewer bytes per card."""

    def preprocess(self, source: str, name: str | None, filename: str | None = None) -> str:
        return _NEWLINE_RUN.sub(" ", source) if name == "cards.html.j2" else source


_NEWLINE_RUN = re.compile(r"[ \t]*\n\s*")

_ENV = _RecordEnvironment(
    loader=jinja2.PackageLoader("dualcog.explorer", "templates"),
    extensions=[_CollapseNewlines],
    autoescape=jinja2.select_autoescape(["html", "j2"]),
    trim_blocks=True,
    lstrip_blocks=True,
    undefined=jinja2.StrictUndefined,
)
_ENV.filters["n"] = lambda value: f"{value:.2f}".rstrip("0").rstrip(".")  # SVG numbers


def _ticks(duration: float) -> list[float]:
    steps = (0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600)
    step = next((s for s in steps if duration / s <= 8), steps[-1])
    return [round(i * step, 6) for i in range(int(duration / step + 1e-9) + 1)]


def task_titles() -> dict[str, str]:
    titles = {t: s.display_name for t, s in SCORED_BY_TASK.items()}
    titles.update({"behavior": "Behavior (both levels)", "position": "Position family (LP + SP)",
                   "action_observation": "Action-observation family (FO + AD)",
                   "video": "Video family (behavior + visibility)",
                   "overall": "All tasks (aggregates)"})  # fmt: skip
    return titles


def task_filters(present: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Task ids a `#task=` filter accepts (request kinds, scored tasks, dual families), mapped
    to the request kinds they select and the outcome slot judged (a: first, b: atomic)."""
    number = {task: i for i, task in enumerate(present)}
    out: dict[str, dict[str, Any]] = {}
    for task in present:
        out[task] = {"tasks": [number[task]], "slot": "ab" if task == "behavior" else "a"}
    if "behavior" in number:
        out["composite_behavior"] = {"tasks": [number["behavior"]], "slot": "a"}
        out["atomic_behavior"] = {"tasks": [number["behavior"]], "slot": "b"}
    for family, members in IMAGE_DUAL_FAMILIES.items():
        chosen = [number[t] for t in members if t in number]
        if chosen:
            out[family] = {"tasks": chosen, "slot": "a"}
    chosen = [number[t] for t in VIDEO_FAMILY if t in number]
    if chosen:
        out["video"] = {"tasks": chosen, "slot": "ab"}
    if present:  # the leaderboard's aggregate columns link here: every sample
        out["overall"] = {"tasks": list(range(len(present))), "slot": "ab"}
    return out


def _entry(record, tasks, difficulties) -> list[int] | None:
    if record is None:
        return None
    outcomes = list(record["outcomes"].values())
    return [
        tasks.index(record["task"]),
        difficulties.index(record["difficulty"]) if record["difficulty"] in difficulties else -1,
        STAGES.index(record["stage"]) if record["stage"] in STAGES else -1,
        outcomes[0],
        outcomes[1] if len(outcomes) > 1 else -1,  # behavior: atomic level
        OUTCOMES.index(record["result"]) if record.get("result") in OUTCOMES else -1,
    ]


@dataclass(frozen=True)
class ExplorerFiles:
    page: Path
    chunks: list[Path]

    def sizes(self) -> dict[str, int]:
        chunk_sizes = [p.stat().st_size for p in self.chunks]
        return {
            "page_bytes": self.page.stat().st_size,
            "chunks": len(chunk_sizes),
            "largest_chunk_bytes": max(chunk_sizes, default=0),
            "total_chunk_bytes": sum(chunk_sizes),
        }


def _json_for_script(value: Any) -> str:
    """JSON safe inside a <script> element (no `</script>` or `<!--` can form)."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render_cards(records: Sequence[Mapping | None], model: str) -> list[str | None]:
    macro = _ENV.get_template("cards.html.j2").make_module(_globals()).card
    return [None if r is None else str(macro(r, model)) for r in records]


def _globals() -> dict[str, Any]:
    return {
        "task_titles": task_titles(),
        "level_titles": LEVEL_TITLES,
        "box_titles": BOX_TITLES,
        "raw_limit": RAW_TEXT_LIMIT,
        "ticks": _ticks,
    }


def write_explorer(
    model: str,
    records: Sequence[Mapping | None],
    page_path: str | Path,
    data_dir: str | Path,
    *,
    all_models: Sequence[str],
    stamp: Mapping[str, Any] | None,
    label: str | None = None,
) -> ExplorerFiles:
    """Write the model's page and its card chunks; stale chunks in `data_dir` are removed."""
    page_path, data_dir = Path(page_path), Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    for old in data_dir.glob("c*.js"):
        old.unlink()
    cards = render_cards(records, model)
    chunk_paths = []
    for number in range(math.ceil(len(cards) / CHUNK_SIZE)):
        part = cards[number * CHUNK_SIZE : (number + 1) * CHUNK_SIZE]
        if all(c is None for c in part):
            continue
        path = data_dir / f"c{number:05d}.js"
        path.write_text(
            f"dualcogChunk({json.dumps(model)},{number},{json.dumps(part, ensure_ascii=False)});\n",
            encoding="utf-8",
        )
        chunk_paths.append(path)
    present = [k.task for k in REQUEST_KINDS if any(r and r["task"] == k.task for r in records)]
    difficulties = list(IMAGE_DIFFICULTIES + VIDEO_DIFFICULTIES)
    filters = task_filters(present)
    titles = task_titles()
    index = {
        "model": model,
        "chunk_size": CHUNK_SIZE,
        "page_size": PAGE_SIZE,
        "tasks": present,
        "difficulties": difficulties,
        "stages": list(STAGES),
        "results": list(OUTCOMES),
        "task_filters": filters,
        "entries": [_entry(r, present, difficulties) for r in records],
    }
    used_difficulties = {r["difficulty"] for r in records if r}
    html = _ENV.get_template("page.html.j2").render(
        **_globals(),
        model=model,
        model_label=label or model,
        all_models=list(all_models),
        other_models=[m for m in all_models if m != model],
        task_choices=[
            (
                t,
                titles.get(t, t)
                + (f" ({TASK_ABBREVIATIONS[t]})" if t in TASK_ABBREVIATIONS else ""),
            )
            for t in filters
        ],  # fmt: skip
        difficulties=[d for d in difficulties if d in used_difficulties],
        stages=STAGES,
        results=[(o, OUTCOME_TITLES[o]) for o in OUTCOMES],
        page_size=PAGE_SIZE,
        stamp_rows=stamp_rows(stamp) if stamp else [],
        index_json=jinja2.utils.markupsafe.Markup(_json_for_script(index)),
    )
    page_path.parent.mkdir(parents=True, exist_ok=True)
    page_path.write_text(html, encoding="utf-8")
    return ExplorerFiles(page_path, chunk_paths)
