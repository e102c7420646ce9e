"""Render model-independent requests: the text of every prompt and its ordered media keys."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dualcog.errors import DataError
from dualcog.media.store import ImageSettings, PreparedFrames
from dualcog.prompts.templates import render_prompt_texts
from dualcog.tasks import REQUEST_BY_TASK

if TYPE_CHECKING:  # imported where a frame is built: the render jobs read and write Arrow
    import pandas as pd

PROMPT_COLUMNS = ["sample_id", "task", "request_key", "system_text", "user_text", "media_keys",
                  "media_kinds", "offered_option_ids"]  # fmt: skip
# What rendering reads of a sample (SAMPLES columns).
RENDER_COLUMNS = ["sample_id", "task", "manifest_path", "system_prompt", "user_prompt",
                  "prompt_vars", "media", "options"]  # fmt: skip

VIDEO_MODES = ("video_url", "frames")


def request_key(
    task: str,
    system_text: str,
    user_text: str,
    media_keys: Sequence[str],
    media_kinds: Sequence[str],
) -> str:
    """Hash of everything that decides a request except the model and its settings."""
    payload = json.dumps(
        [task, system_text, user_text, list(media_keys), list(media_kinds)], ensure_ascii=False
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def video_mode_name(mode: str, frames: int) -> str:
    """File-name tag of a video rendering: `video_url` or `frames<N>`."""
    if mode == "video_url":
        return mode
    if mode == "frames":
        return f"frames{frames}"
    raise ValueError(f"unknown video mode {mode!r} (expected one of {VIDEO_MODES})")


def frame_note(timestamps: Sequence[float]) -> str:
    stamps = ", ".join(f"{t:.2f}s" for t in timestamps)
    return (
        f"\n\nThe video is given as {len(timestamps)} frames sampled uniformly, in order, "
        f"at these timestamps: {stamps}. Give intervals in seconds of the original video."
    )


def _prompt_texts(row: Mapping[str, Any]) -> tuple[str, str]:
    system, user = row.get("system_prompt"), row.get("user_prompt")
    if isinstance(system, str) and system and isinstance(user, str) and user:
        return system, user

    variables = json.loads(row["prompt_vars"]) if row.get("prompt_vars") else {}
    try:
        rendered_system, rendered_user = render_prompt_texts(row["task"], variables)
    except (KeyError, ValueError) as exc:
        raise DataError(
            f"no stored prompt and the template cannot be rendered: {exc}",
            file=row.get("manifest_path"),
            sample=row["sample_id"],
            field="prompt_vars",
        ) from exc
    return (system if isinstance(system, str) and system else rendered_system), (
        user if isinstance(user, str) and user else rendered_user
    )


def render_prompts(
    samples: pd.DataFrame,
    task: str,
    images: Mapping[str, str],
    videos: Mapping[str, str] | None = None,
    frames: Mapping[str, PreparedFrames] | None = None,
) -> pd.DataFrame:
    """Prompts of one request kind (PROMPTS columns), in sample order.

    `images` maps a resolved source path to its media store key (`dualcog.media.store.image_key`:
    known without preparing the image); for video tasks pass either `videos` (source → MP4
    key, `video_url` mode) or `frames` (source → sampled frames).
    """
    import pandas as pd

    records = samples[samples["task"] == task].to_dict("records")
    return pd.DataFrame(
        render_prompt_rows(records, task, images, videos, frames), columns=PROMPT_COLUMNS
    )


def render_prompt_rows(
    samples: Sequence[Mapping[str, Any]],
    task: str,
    images: Mapping[str, str],
    videos: Mapping[str, str] | None = None,
    frames: Mapping[str, PreparedFrames] | None = None,
) -> list[dict[str, Any]]:
    """`render_prompts` over sample records (e.g. `pa.Table.to_pylist()`, no pandas): one
    PROMPTS row for each record of `task`, in order."""
    kind = REQUEST_BY_TASK[task]
    rows = []
    for row in samples:
        if row["task"] != task:
            continue
        system_text, user_text = _prompt_texts(row)
        keys: list[str] = []
        kinds: list[str] = []
        for item in row["media"]:
            source = item["resolved_path"]
            if item["role"] == "video":
                if frames is not None:
                    prepared = frames[source]
                    keys.extend(prepared.keys)
                    kinds.extend(["frames"] * len(prepared.keys))
                    user_text += frame_note(prepared.timestamps)
                elif videos is not None:
                    keys.append(videos[source])
                    kinds.append("video")
                else:
                    raise ValueError(f"{task}: a video rendering (videos or frames) is required")
            else:
                keys.append(images[source])
                kinds.append("image")
        if kind.modality == "video" and kinds and kinds[0] == "image":
            raise ValueError(f"{row['sample_id']}: the video must come before the reference")
        offered = [o["option_id"] for o in (row["options"] if row["options"] is not None else [])]
        rows.append(
            {
                "sample_id": row["sample_id"],
                "task": task,
                "request_key": request_key(task, system_text, user_text, keys, kinds),
                "system_text": system_text,
                "user_text": user_text,
                "media_keys": keys,
                "media_kinds": kinds,
                "offered_option_ids": offered,
            }
        )
    return rows


def _media_lists(samples: pd.DataFrame | Sequence[Mapping[str, Any]]) -> Any:
    """The `media` cell of each sample, from a frame or from records."""
    if hasattr(samples, "columns"):
        return samples["media"]
    return [row["media"] for row in samples]


def image_sources(samples: pd.DataFrame | Sequence[Mapping[str, Any]]) -> list[str]:
    """Every distinct still image the requests use (references, targets, candidates)."""
    return sorted(
        {
            item["resolved_path"]
            for media in _media_lists(samples)
            for item in media
            if item["role"] != "video"
        }
    )


def video_sources(samples: pd.DataFrame | Sequence[Mapping[str, Any]]) -> list[str]:
    return sorted(
        {
            item["resolved_path"]
            for media in _media_lists(samples)
            for item in media
            if item["role"] == "video"
        }
    )


__all__ = [
    "ImageSettings",
    "VIDEO_MODES",
    "frame_note",
    "image_sources",
    "render_prompt_rows",
    "render_prompts",
    "request_key",
    "video_mode_name",
    "video_sources",
]
