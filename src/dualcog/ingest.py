"""Ingest the released UAV-DualCog manifests into the canonical samples table.

Reads the authors' files as they are (docs/upstream_format.md §1–3): finds the latest manifest of
every scene under a data root, validates every sample, resolves media paths that were written
relative to the authors' workspace, and emits one row per sample in `schemas.SAMPLES`.
Anything wrong stops with a `DataError` naming the file, the sample and the field.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dualcog.errors import DataError
from dualcog.tasks import REQUEST_BY_UPSTREAM

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)

IMAGE_MANIFEST_DIR = ("image_tasks", "manifests")
VIDEO_MANIFEST_DIR = ("video_tasks", "datasets")
LATEST_SUFFIX = ".latest_manifest.json"
# `<scene>_qa_manifest_<N>samples_<stamp>.json`; video copies `<scene>_<word>_manifest_...`
_TIMESTAMPED = re.compile(r"^(?P<scene>.+?)_(?:[a-z]+_)?manifest_.*?(?P<stamp>\d{8}_\d{6})\.json$")
_CONTEXT_INDEX = re.compile(r"_(\d{6})_(?:where|what|how)$")

IMAGE_COMMON_KEYS = (
    "sample_id",
    "scene_id",
    "landmark_id",
    "landmark_description",
    "task_type",
    "difficulty",
    "reference_image_with_bbox",
    "answer_option_id",
    "answer_bbox_xyxy_norm",
)
IMAGE_TASK_KEYS = {
    "self_where": ("label_options", "target_image"),
    "env_where": ("label_options", "target_image"),
    "env_how": ("label_options", "target_image"),
    "self_what": ("candidates",),
}
VIDEO_COMMON_KEYS = (
    "sample_id",
    "scene_id",
    "mission_id",
    "landmark_id",
    "reference_image_with_bbox",
)
VIDEO_TASK_KEYS = {
    "self_instance_recognition_joint": ("choice_options", "answer_items"),
    "env_visibility_reasoning": (),
}


@dataclass(frozen=True)
class ManifestFile:
    path: Path
    modality: str  # image | video
    scene_dir: Path  # <engine>_<scene_id> folder that holds image_tasks/ and video_tasks/


def _stamp(path: Path) -> str:
    match = _TIMESTAMPED.match(path.name)
    return match.group("stamp") if match else ""


def find_manifests(data_root: str | Path) -> list[ManifestFile]:
    """The latest image and video manifest of every scene under `data_root`.

    A scene's `<scene>.latest_manifest.json` wins; without one, the timestamped copy with the
    newest `YYYYmmdd_HHMMSS` stamp is used. Works for any root folder name
    (`task_pipeline_data/UAV-DualCog-V1`, `task_data`, or the user's own).
    """
    root = Path(data_root)
    if not root.is_dir():
        raise DataError("data root is not a folder", file=str(root))
    found: list[ManifestFile] = []
    folders = _manifest_folders(root)
    for modality, layout in (("image", IMAGE_MANIFEST_DIR), ("video", VIDEO_MANIFEST_DIR)):
        for folder in sorted(folders[layout]):
            files = sorted(p for p in folder.glob("*.json") if p.is_file())
            latest = [p for p in files if p.name.endswith(LATEST_SUFFIX)]
            chosen = list(latest)
            covered = {p.name[: -len(LATEST_SUFFIX)] for p in latest}
            by_scene: dict[str, Path] = {}
            for p in files:
                if p in latest or not _stamp(p):
                    continue
                scene = _TIMESTAMPED.match(p.name).group("scene")  # type: ignore[union-attr]
                if scene in covered:
                    continue
                if scene not in by_scene or _stamp(p) > _stamp(by_scene[scene]):
                    by_scene[scene] = p
            chosen.extend(by_scene.values())
            for p in sorted(chosen):
                found.append(ManifestFile(p, modality, folder.parent.parent))
    if not found:
        raise DataError(
            "no manifests found (expected */image_tasks/manifests/*.json or "
            "*/video_tasks/datasets/*.json)",
            file=str(root),
        )
    return found


def _manifest_folders(root: Path) -> dict[tuple[str, str], list[Path]]:
    """Every `**/image_tasks/manifests` and `**/video_tasks/datasets` folder under `root`,
    found in one walk of the tree (the DAG is built from them on every Snakemake call, and
    a benchmark holds thousands of media files)."""
    layouts = (IMAGE_MANIFEST_DIR, VIDEO_MANIFEST_DIR)
    found: dict[tuple[str, str], list[Path]] = {layout: [] for layout in layouts}
    for folder, subfolders, _ in os.walk(root, followlinks=True):
        here = Path(folder)
        for layout in layouts:
            if here.name == layout[0] and layout[1] in subfolders:
                found[layout].append(here / layout[1])
    return found


class MediaOutsideRoots(Exception):
    """A written media path that resolves (symlinks followed) outside every allowed folder."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _contained(path: Path, roots: Sequence[Path]) -> bool:
    real = Path(os.path.realpath(path))
    return any(real == root or root in real.parents for root in roots)


class MediaResolver:
    """Resolve manifest media paths written relative to the authors' workspace root.

    Tries the path as written (absolute, or under the data root), then re-roots it: every
    suffix of the path is tried under the data root, the task root and their parents, so a
    download unpacked under another folder name (`task_pipeline_data/` instead of
    `task_pipeline_data/UAV-DualCog-V1/`) still resolves.

    A manifest comes from someone else: a path that climbs with `..`, or whose file (symlinks
    followed) lies outside the data root and every listed `media_roots` folder, is refused
    with `MediaOutsideRoots`, so such a file is never opened, copied or sent.
    """

    def __init__(self, data_root: str | Path, media_roots: Iterable[str | Path] = ()) -> None:
        self.data_root = Path(data_root).resolve()
        self.allowed = [Path(os.path.realpath(p)) for p in (data_root, *media_roots)]
        self._cache: dict[tuple[str, Path], Path | None | MediaOutsideRoots] = {}

    def resolve(self, written: str, scene_dir: Path) -> Path | None:
        key = (written, scene_dir)
        if key not in self._cache:
            try:
                self._cache[key] = self._search(written, scene_dir.resolve())
            except MediaOutsideRoots as refused:
                self._cache[key] = refused
        found = self._cache[key]
        if isinstance(found, MediaOutsideRoots):
            raise found
        return found

    def _search(self, written: str, scene_dir: Path) -> Path | None:
        path = Path(written)
        if ".." in path.parts:
            raise MediaOutsideRoots("the path climbs out of its folder with '..'")
        outside: Path | None = None
        for candidate in self._candidates(path, scene_dir):
            if not candidate.is_file():
                continue
            if _contained(candidate, self.allowed):
                return candidate
            outside = outside or candidate
        if outside is not None:
            raise MediaOutsideRoots(
                f"{outside} resolves to {os.path.realpath(outside)}, outside data_root "
                f"{self.data_root}"
                + ("" if len(self.allowed) == 1 else " and media_roots")
                + " (list its folder under media_roots: in the config to allow it)"
            )
        return None

    def _candidates(self, path: Path, scene_dir: Path) -> Iterator[Path]:
        if path.is_absolute():
            yield path
        else:
            yield self.data_root / path
        parts = [p for p in path.parts if p not in ("/", "")]
        # The task root (parent of the scene folder) and its ancestors up to the data root.
        bases = [self.data_root]
        for base in (scene_dir.parent, *scene_dir.parent.parents):
            if base == self.data_root or self.data_root not in base.parents:
                break
            bases.append(base)
        for start in range(len(parts)):
            suffix = Path(*parts[start:])
            for base in bases:
                yield base / suffix


def _load_json(path: Path) -> Mapping[str, Any]:
    try:
        with path.open(encoding="utf-8") as handle:
            data = json.load(handle)
    except json.JSONDecodeError as exc:
        raise DataError(f"not valid JSON ({exc})", file=str(path)) from exc
    if not isinstance(data, dict):
        raise DataError("top level is not a JSON object", file=str(path))
    if not isinstance(data.get("samples"), list):
        raise DataError("missing or non-list key", file=str(path), field="samples")
    return data


class _SampleReader:
    """Field access for one manifest sample that raises errors naming file/sample/field."""

    def __init__(self, raw: Mapping[str, Any], file: Path, index: int) -> None:
        if not isinstance(raw, dict):
            raise DataError(f"sample #{index} is not a JSON object", file=str(file))
        self.raw = raw
        self.file = str(file)
        self.sample_id = str(raw.get("sample_id") or f"#{index}")

    def fail(self, message: str, field: str | None = None) -> DataError:
        return DataError(message, file=self.file, sample=self.sample_id, field=field)

    def require(self, keys: Iterable[str]) -> None:
        for key in keys:
            if key not in self.raw or self.raw[key] is None:
                raise self.fail("required key is missing", key)

    def text(self, key: str, default: str | None = None) -> str | None:
        value = self.raw.get(key, default)
        if value is None:
            return None
        if isinstance(value, (dict, list)):
            raise self.fail("expected a string", key)
        return str(value)

    def number(self, key: str) -> float | None:
        value = self.raw.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(f"expected a number, got {value!r}", key)
        if not math.isfinite(value):
            raise self.fail(f"expected a finite number, got {value!r}", key)
        return float(value)

    def box(self, value: Any, field: str) -> list[float]:
        if (
            not isinstance(value, (list, tuple))
            or len(value) != 4
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
        ):
            raise self.fail(f"malformed box {value!r}: expected [x1,y1,x2,y2]", field)
        x1, y1, x2, y2 = (float(v) for v in value)
        if not all(math.isfinite(v) and 0.0 <= v <= 1.0 for v in (x1, y1, x2, y2)):
            raise self.fail(f"malformed box {value!r}: coordinates must lie in [0,1]", field)
        if not (x1 < x2 and y1 < y2):
            raise self.fail(f"malformed box {value!r}: needs x1<x2 and y1<y2", field)
        return [x1, y1, x2, y2]

    def options(self, key: str) -> list[dict[str, Any]]:
        value = self.raw.get(key)
        if not isinstance(value, list) or not value:
            raise self.fail("expected a non-empty list of options", key)
        seen: set[str] = set()
        options = []
        for item in value:
            if not isinstance(item, dict) or not isinstance(item.get("option_id"), str):
                raise self.fail(f"malformed option {item!r}", key)
            option_id = item["option_id"]
            if option_id in seen:
                raise self.fail(f"duplicate option id {option_id!r}", key)
            seen.add(option_id)
            options.append({"option_id": option_id, "label": str(item.get("label", ""))})
        return options

    def intervals(self, value: Any, field: str) -> list[list[float]]:
        """Gold intervals as released: `[[s,e],...]` or `[{"start_sec","end_sec"},...]`."""
        if not isinstance(value, list):
            raise self.fail(f"malformed intervals {value!r}: expected a list", field)
        result = []
        for item in value:
            if isinstance(item, dict) and "start_sec" in item and "end_sec" in item:
                pair = [item["start_sec"], item["end_sec"]]
            elif isinstance(item, (list, tuple)) and len(item) == 2:
                pair = list(item)
            else:
                raise self.fail(f"malformed interval {item!r}", field)
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in pair):
                raise self.fail(f"malformed interval {item!r}: needs two numbers", field)
            start, end = float(pair[0]), float(pair[1])
            if not (math.isfinite(start) and math.isfinite(end)) or start < 0 or end < start:
                raise self.fail(f"malformed interval {item!r}: needs 0 <= start <= end", field)
            result.append([start, end])
        return result


def _gold_id_set(reader: _SampleReader, gold_option: str) -> list[str]:
    """Legacy scoring's gold ids: `answer_option_ids` stripped, empties dropped, else the one."""
    listed = reader.raw.get("answer_option_ids")
    if listed is None:
        return [gold_option]
    if not isinstance(listed, list) or not all(isinstance(item, str) for item in listed):
        raise reader.fail(
            f"expected a list of option id strings, got {listed!r}", "answer_option_ids"
        )
    ids = list(dict.fromkeys(item.strip() for item in listed if item.strip()))
    return ids or [gold_option]


def _context_index(reader: _SampleReader) -> int:
    match = _CONTEXT_INDEX.search(reader.sample_id)
    if not match:
        raise reader.fail(
            "sample id does not end in _<6-digit index>_where|_what|_how", "sample_id"
        )
    return int(match.group(1))


class _Ingestor:
    def __init__(self, data_root: Path, media_roots: Iterable[str | Path] = ()) -> None:
        self.data_root = data_root
        self.resolver = MediaResolver(data_root, media_roots)

    def media(self, reader: _SampleReader, role: str, key: str, scene_dir: Path) -> dict:
        written = reader.raw.get(key)
        if not isinstance(written, str) or not written:
            raise reader.fail("required media path is missing", key)
        try:
            resolved = self.resolver.resolve(written, scene_dir)
        except MediaOutsideRoots as refused:
            raise reader.fail(f"media path {written!r} refused: {refused.reason}", key) from None
        if resolved is None:
            raise reader.fail(f"media file not found: {written}", key)
        return {"role": role, "path": written, "resolved_path": str(resolved)}

    def manifest_path(self, manifest: ManifestFile) -> str:
        try:
            return str(manifest.path.resolve().relative_to(self.data_root.resolve()))
        except ValueError:
            return str(manifest.path)

    # -- image -----------------------------------------------------------------------------
    def image_row(self, reader: _SampleReader, manifest: ManifestFile, order: int) -> dict:
        reader.require(IMAGE_COMMON_KEYS)
        task_type = reader.text("task_type")
        if task_type not in IMAGE_TASK_KEYS:
            raise reader.fail(f"unknown image task type {task_type!r}", "task_type")
        reader.require(IMAGE_TASK_KEYS[task_type])
        kind = REQUEST_BY_UPSTREAM[task_type]
        reference = self.media(reader, "reference", "reference_image_with_bbox", manifest.scene_dir)
        gold_option = reader.text("answer_option_id")
        gold_bbox = reader.box(reader.raw["answer_bbox_xyxy_norm"], "answer_bbox_xyxy_norm")
        released_bbox = list(gold_bbox)
        candidates: list[dict] | None = None
        if task_type == "self_what":
            raw_candidates = reader.raw["candidates"]
            if not isinstance(raw_candidates, list) or not raw_candidates:
                raise reader.fail("expected a non-empty list of candidates", "candidates")
            candidates, media = [], [reference]
            for position, cand in enumerate(raw_candidates):
                field = f"candidates[{position}]"
                if not isinstance(cand, dict) or not isinstance(cand.get("option_id"), str):
                    raise reader.fail("malformed candidate (needs option_id)", field)
                sub = _SampleReader({**cand, "sample_id": reader.sample_id}, manifest.path, 0)
                sub.file = reader.file
                image = self.media(
                    sub, f"candidate_{cand['option_id']}", "image", manifest.scene_dir
                )
                media.append(image)
                box = reader.box(cand.get("bbox_xyxy_norm"), f"{field}.bbox_xyxy_norm")
                view = cand.get("view_under_definition")
                candidates.append(
                    {
                        "option_id": cand["option_id"],
                        "bbox": box,
                        "view": None if view is None else str(view),
                    }
                )
            options = [
                {"option_id": c["option_id"], "label": f"Image {i + 2}"}
                for i, c in enumerate(candidates)
            ]
            by_id = {c["option_id"]: c for c in candidates}
            if gold_option in by_id and by_id[gold_option]["bbox"] != gold_bbox:
                log.warning(
                    "%s: answer_bbox_xyxy_norm differs from the correct candidate's box; "
                    "using the candidate's box as gold",
                    reader.sample_id,
                )
                gold_bbox = by_id[gold_option]["bbox"]
        else:
            options = reader.options("label_options")
            target = self.media(reader, "target", "target_image", manifest.scene_dir)
            media = [reference, target]
        offered = [o["option_id"] for o in options]
        if gold_option not in offered:
            raise reader.fail(
                f"answer {gold_option!r} is not one of the offered options {offered}",
                "answer_option_id",
            )
        context_index = _context_index(reader)
        prompt_vars = {
            "landmark_description": reader.text("landmark_description"),
            "reference_object_view": reader.text("reference_object_view"),
            "behavior_instance": reader.text("behavior_instance"),
            "options": options,
        }
        return {
            **self.common(reader, manifest, order, kind.task, task_type, "image"),
            "difficulty": reader.text("difficulty"),
            "landmark_category": reader.text("landmark_category"),
            "prompt_vars": json.dumps(prompt_vars, sort_keys=True),
            "media": media,
            "options": [{**o, "level": None} for o in options],
            "context_index": context_index,
            "context_slot": (context_index - 1) // 2,
            "gold_option_id": gold_option,
            "gold_bbox": gold_bbox,
            "gold_option_ids": _gold_id_set(reader, gold_option),
            "answer_bbox": released_bbox,
            "candidates": candidates,
        }

    def common(
        self,
        reader: _SampleReader,
        manifest: ManifestFile,
        order: int,
        task: str,
        upstream: str,
        modality: str,
    ) -> dict:
        return {
            "sample_id": reader.sample_id,
            "task": task,
            "upstream_task_type": upstream,
            "modality": modality,
            "scene_id": reader.text("scene_id"),
            "engine": reader.text("engine"),
            "landmark_id": reader.text("landmark_id"),
            "landmark_description": reader.text("landmark_description"),
            "manifest_path": self.manifest_path(manifest),
            "manifest_order": order,
            "system_prompt": reader.text("system_prompt"),
            "user_prompt": reader.text("user_prompt") or reader.text("prompt_text"),
        }

    # -- video -----------------------------------------------------------------------------
    def video_row(self, reader: _SampleReader, manifest: ManifestFile, order: int) -> dict:
        reader.require(VIDEO_COMMON_KEYS)
        form = reader.text("form") or reader.text("task_name")
        if form not in VIDEO_TASK_KEYS:
            raise reader.fail(f"unknown video task form {form!r}", "form")
        reader.require(VIDEO_TASK_KEYS[form])
        kind = REQUEST_BY_UPSTREAM[form]
        video_key = "video_web_path" if reader.raw.get("video_web_path") else "video_path"
        video = self.media(reader, "video", video_key, manifest.scene_dir)
        reference = self.media(reader, "reference", "reference_image_with_bbox", manifest.scene_dir)
        fps = reader.number("fps")
        frame_count = reader.number("frame_count")
        if fps is not None and fps <= 0:
            raise reader.fail(f"fps must be positive, got {fps}", "fps")
        if fps and frame_count is not None:
            duration = (frame_count - 1) / fps
        else:
            # here: media.store loads PIL; the Snakefile imports this module
            from dualcog.media.store import video_timestamp_span

            duration = video_timestamp_span(Path(video["resolved_path"]))
        mission_id = reader.text("mission_id") or ""
        set_id = reader.text("set_id")
        row = {
            **self.common(reader, manifest, order, kind.task, form, "video"),
            "difficulty": reader.text("difficulty_band"),
            "landmark_category": reader.text("landmark_category"),
            "media": [video, reference],
            "mission_id": mission_id,
            "set_id": set_id,
            "composite_mission": _is_composite_mission(mission_id, set_id),
            "fps": fps,
            "frame_count": None if frame_count is None else int(frame_count),
            "duration_sec": duration,
        }
        prompt_vars: dict[str, Any] = {
            "landmark_description": reader.text("landmark_description"),
            "duration_sec": duration,
        }
        if kind.task == "behavior":
            options = reader.options("choice_options")
            offered = {o["option_id"]: o for o in options}
            items = reader.raw["answer_items"]
            if not isinstance(items, list):
                raise reader.fail("expected a list", "answer_items")
            gold = []
            for position, item in enumerate(items):
                field = f"answer_items[{position}]"
                if not isinstance(item, dict):
                    raise reader.fail("malformed answer item", field)
                option_id = item.get("option_id")
                if option_id not in offered:
                    raise reader.fail(
                        f"unknown option {option_id!r} (offered: {sorted(offered)})",
                        f"{field}.option_id",
                    )
                raw_intervals = item.get("intervals_sec")
                gold.append(
                    {
                        "option_id": option_id,
                        "label": offered[option_id]["label"],
                        "intervals": reader.intervals(raw_intervals, f"{field}.intervals_sec"),
                        "pair_encoded": isinstance(raw_intervals, list)
                        and bool(raw_intervals)
                        and all(isinstance(iv, (list, tuple)) for iv in raw_intervals),
                    }
                )
            row["options"] = options
            row["gold_items"] = gold
            prompt_vars["options"] = options
        else:
            answer = reader.raw.get("gold_environment_answer")
            source = answer if isinstance(answer, dict) else reader.raw
            prefix = "gold_environment_answer." if isinstance(answer, dict) else ""
            count = source.get("visible_count")
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise reader.fail(
                    f"expected an integer >= 0, got {count!r}", f"{prefix}visible_count"
                )
            row["gold_visible_count"] = count
            row["gold_visible_intervals"] = reader.intervals(
                source.get("visible_intervals_sec"), f"{prefix}visible_intervals_sec"
            )
            row["options"] = []
        row["prompt_vars"] = json.dumps(prompt_vars, sort_keys=True)
        return row


def _is_composite_mission(mission_id: str, set_id: str | None) -> bool:
    """docs/protocol.md §5: `_composite_`/`_atomic_` in the mission id, else a non-atomic set id."""
    if "_composite_" in mission_id:
        return True
    if "_atomic_" in mission_id:
        return False
    return bool(set_id) and not str(set_id).startswith("atomic")


def _composite_gold_index(row: Mapping[str, Any], file: str) -> int:
    """The composite gold item of a composite mission (docs/protocol.md §5)."""
    items = row["gold_items"]
    spanning = []
    for i, item in enumerate(items):
        if len(item["intervals"]) != 1:
            continue
        start, end = item["intervals"][0]
        others = [iv for j, other in enumerate(items) if j != i for iv in other["intervals"]]
        if all(start <= s and e <= end for s, e in others):
            spanning.append(i)
    if len(spanning) == 1:
        return spanning[0]
    pair_encoded = [i for i, item in enumerate(items) if item["pair_encoded"]]
    candidates = [i for i in pair_encoded if i in spanning] if spanning else pair_encoded
    if len(candidates) == 1:
        return candidates[0]
    raise DataError(
        "cannot identify the composite gold item of this composite mission: "
        f"{len(spanning)} items span all others and {len(pair_encoded)} use [[s,e]] pairs",
        file=file,
        sample=row["sample_id"],
        field="answer_items",
    )


def assign_behavior_levels(rows: Sequence[dict], file: str) -> None:
    """Set composite/atomic levels on the options and gold items of one manifest's samples."""
    behavior = [r for r in rows if r["task"] == "behavior"]
    composite_labels: set[str] = set()
    own_composite: dict[str, int | None] = {}
    for row in behavior:
        if row["composite_mission"] and row["gold_items"]:
            index = _composite_gold_index(row, file)
            composite_labels.add(row["gold_items"][index]["label"])
            own_composite[row["sample_id"]] = index
        else:
            own_composite[row["sample_id"]] = None
    for row in behavior:
        index = own_composite[row["sample_id"]]
        gold_levels = {}
        for i, item in enumerate(row["gold_items"]):
            item["level"] = "composite" if i == index else "atomic"
            gold_levels[item["option_id"]] = item["level"]
            del item["pair_encoded"]
        for option in row["options"]:
            if option["option_id"] in gold_levels:
                option["level"] = gold_levels[option["option_id"]]
            else:
                option["level"] = "composite" if option["label"] in composite_labels else "atomic"


def ingest(
    data_root: str | Path,
    tasks: Iterable[str] | None = None,
    exclude_samples: Iterable[str] = (),
    media_roots: Iterable[str | Path] = (),
) -> tuple[pa.Table, list[str]]:
    """Read every latest manifest under `data_root` into the SAMPLES table, and list the ids
    of `exclude_samples` that were found (sorted). Raises `DataError` on bad data.

    `tasks` limits the request kinds kept (default: all). `exclude_samples` (the config key)
    drops those sample ids after their manifest is read, so every other sample is read
    exactly as without the exclusion (behavior levels are assigned per whole manifest).
    Media must lie (symlinks followed) under `data_root` or one of `media_roots`.
    """
    # Imported here: the Snakefile imports this module for `find_manifests`, and pyarrow at
    # import would add to every Snakemake start-up (each cluster job's too).
    from dualcog.schemas import SAMPLES, table_from_rows

    rows, dropped = _ingest_rows(data_root, tasks, exclude_samples, media_roots)
    return table_from_rows(rows, SAMPLES), dropped


def _ingest_rows(
    data_root: str | Path,
    tasks: Iterable[str] | None,
    exclude_samples: Iterable[str],
    media_roots: Iterable[str | Path],
) -> tuple[list[dict[str, Any]], list[str]]:
    excluded = set(exclude_samples)
    dropped: list[str] = []
    root = Path(data_root)
    wanted = None if tasks is None else set(tasks)
    ingestor = _Ingestor(root, media_roots)
    rows: list[dict] = []
    seen: dict[str, str] = {}
    for manifest in find_manifests(root):
        data = _load_json(manifest.path)
        manifest_rows = []
        for order, raw in enumerate(data["samples"]):
            reader = _SampleReader(raw, manifest.path, order)
            if "sample_id" not in raw:
                raise reader.fail("required key is missing", "sample_id")
            if manifest.modality == "image":
                task_type = raw.get("task_type")
                kind = REQUEST_BY_UPSTREAM.get(task_type) if isinstance(task_type, str) else None
            else:
                form = raw.get("form") or raw.get("task_name")
                kind = REQUEST_BY_UPSTREAM.get(form) if isinstance(form, str) else None
            if kind is not None and wanted is not None and kind.task not in wanted:
                continue
            if manifest.modality == "image":
                row = ingestor.image_row(reader, manifest, order)
            else:
                row = ingestor.video_row(reader, manifest, order)
            if row["sample_id"] in seen:
                raise reader.fail(
                    f"duplicate sample id (first seen in {seen[row['sample_id']]})", "sample_id"
                )
            seen[row["sample_id"]] = str(manifest.path)
            manifest_rows.append(row)
        assign_behavior_levels(manifest_rows, str(manifest.path))
        if excluded:
            dropped.extend(r["sample_id"] for r in manifest_rows if r["sample_id"] in excluded)
            manifest_rows = [r for r in manifest_rows if r["sample_id"] not in excluded]
        log.info("ingested %d samples from %s", len(manifest_rows), manifest.path)
        rows.extend(manifest_rows)
    if excluded:
        log.info("excluded %d samples by exclude_samples: %s", len(dropped), sorted(dropped))
        unknown = sorted(excluded - set(dropped))
        if unknown:
            log.warning("exclude_samples names ids not among the run's samples: %s", unknown)
    if not rows:
        raise DataError("no samples of the requested tasks", file=str(root))
    return rows, sorted(dropped)
