"""Render one model run's explorer: a page with the sample index, and card chunks beside it.

Layout under the explorer folder (all relative, so the folder works offline and moved whole):
  <model>.html             CSS, script and the compact filter index inlined
  samples/cNNNNN.js        each sample's card as every model shows it (explorer.records'
                           `sample_cards`: id, question, images, options, gold), CHUNK_SIZE per
                           file, written once for all pages
  data/<model>/cNNNNN.js   the model's records (explorer.records' `sample_records`: its answer,
                           parse, scores, boxes and matches) as JSON, the same chunking
  media/...                thumbnails and frame grids shared by all models (explorer.media)
Chunk numbers follow the benchmark's sample order, the same for every model, so the compare
view loads the same chunk of a second model. The page's script joins a sample's card with a
model's record and draws it with DOM calls (text as text nodes, values as attributes), so
writing a page is one `json.dumps` per chunk.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

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


def _environment() -> jinja2.Environment:
    """The page template's environment: every value autoescaped (a model's name, a stamp
    field), the CSS and script included as they are (they hold no template syntax)."""
    return jinja2.Environment(
        loader=jinja2.PackageLoader("dualcog.explorer", "templates"),
        autoescape=jinja2.select_autoescape(["html.j2"]),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )


# Record keys no card shows (or that the sample's card carries): left out of the chunks.
UNSHOWN_KEYS = frozenset({"id", "task", "difficulty", "pred_box", "count_correct"})
SAMPLES_FOLDER = "samples"  # beside the pages: the sample cards' chunks


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


def _entries(records, tasks, difficulties) -> list[list[int] | None]:
    """Each record's filter entry: task, difficulty, stage, first and second outcome slots,
    request outcome (positions in the index's lists; -1: none)."""
    task_at = {t: i for i, t in enumerate(tasks)}
    difficulty_at = {d: i for i, d in enumerate(difficulties)}
    stage_at = {s: i for i, s in enumerate(STAGES)}
    result_at = {o: i for i, o in enumerate(OUTCOMES)}
    entries: list[list[int] | None] = []
    for record in records:
        if record is None:
            entries.append(None)
            continue
        outcomes = list(record["outcomes"].values())
        entries.append([
            task_at[record["task"]],
            difficulty_at.get(record["difficulty"], -1),
            stage_at.get(record["stage"], -1),
            outcomes[0],
            outcomes[1] if len(outcomes) > 1 else -1,  # behavior: atomic level
            result_at.get(record.get("result"), -1),
        ])  # fmt: skip
    return entries


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


def chunk_records(records: Sequence[Mapping | None]) -> list[dict | None]:
    """The records as a chunk carries them: what the cards show, nothing else."""
    shown: list[dict | None] = []
    for record in records:
        if record is None:
            shown.append(None)
            continue
        record = dict(record)  # a copy less a few keys: cheaper than a filtered dict per record
        for key in UNSHOWN_KEYS.intersection(record):
            del record[key]
        shown.append(record)
    return shown


# Records and cards are trees of lists and dicts (no container holds itself), so the
# encoder's cycle check, a third of encoding a model's chunks, has nothing to find; the text
# is `json.dumps(value, ensure_ascii=False, separators=(",", ":"))`'s.
_CHUNK_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False)


def chunk_script(model: str, number: int, records: Sequence[Mapping | None]) -> str:
    """One chunk file: a call of the page's `dualcogChunk` with the records as JSON (a JSON
    text is a JavaScript expression; its strings cannot end the call)."""
    data = _CHUNK_JSON.encode(records)
    return f"dualcogChunk({json.dumps(model)},{number},{data});\n"


def cards_script(number: int, cards: Sequence[Mapping]) -> str:
    """One chunk of sample cards: a call of the page's `dualcogSamples`."""
    data = _CHUNK_JSON.encode(cards)
    return f"dualcogSamples({number},{data});\n"


def write_sample_cards(cards: Sequence[Mapping], folder: str | Path) -> list[Path]:
    """Write the sample cards (`sample_cards`, all samples in the benchmark's order) as the
    chunks every model's page loads from `samples/` beside it; stale chunks are removed."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("c*.js"):
        old.unlink()
    paths = []
    for number in range(math.ceil(len(cards) / CHUNK_SIZE)):
        path = folder / f"c{number:05d}.js"
        part = cards[number * CHUNK_SIZE : (number + 1) * CHUNK_SIZE]
        path.write_text(cards_script(number, part), encoding="utf-8")
        paths.append(path)
    return paths


def _titles() -> dict[str, Any]:
    """Titles the page's script draws cards with."""
    return {"tasks": task_titles(), "levels": LEVEL_TITLES, "boxes": BOX_TITLES,
            "raw_limit": RAW_TEXT_LIMIT}  # fmt: skip


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
    shown = chunk_records(records)
    chunk_paths = []
    for number in range(math.ceil(len(shown) / CHUNK_SIZE)):
        part = shown[number * CHUNK_SIZE : (number + 1) * CHUNK_SIZE]
        if all(c is None for c in part):
            continue
        path = data_dir / f"c{number:05d}.js"
        path.write_text(chunk_script(model, number, part), encoding="utf-8")
        chunk_paths.append(path)
    run_tasks = {r["task"] for r in records if r}
    present = [k.task for k in REQUEST_KINDS if k.task in run_tasks]
    difficulties = list(IMAGE_DIFFICULTIES + VIDEO_DIFFICULTIES)
    filters = task_filters(present)
    titles = task_titles()
    index = {
        "model": model,
        "samples": SAMPLES_FOLDER,
        "chunk_size": CHUNK_SIZE,
        "page_size": PAGE_SIZE,
        "tasks": present,
        "difficulties": difficulties,
        "stages": list(STAGES),
        "results": list(OUTCOMES),
        "task_filters": filters,
        "titles": _titles(),
        "entries": _entries(records, present, difficulties),
    }
    used_difficulties = {r["difficulty"] for r in records if r}
    task_choices = [
        (t, titles.get(t, t) + (f" ({TASK_ABBREVIATIONS[t]})" if t in TASK_ABBREVIATIONS else ""))
        for t in filters
    ]
    html = (
        _environment()
        .get_template("page.html.j2")
        .render(
            model=model,
            model_label=label or model,
            all_models=list(all_models),
            task_options=task_choices,
            difficulty_options=[(d, d) for d in difficulties if d in used_difficulties],
            result_options=[(o, OUTCOME_TITLES[o]) for o in OUTCOMES],
            stage_options=[(s, s) for s in STAGES],
            compare_options=[(m, m) for m in all_models if m != model],
            stamp_rows=stamp_rows(stamp) if stamp else [],
            page_size=PAGE_SIZE,
            index_json=_json_for_script(index),
        )
    )
    page_path.parent.mkdir(parents=True, exist_ok=True)
    page_path.write_text(html, encoding="utf-8")
    return ExplorerFiles(page_path, chunk_paths)
