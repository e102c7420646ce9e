"""Bad media reported in the user's terms: which manifest, sample and field use each file.

The media store works on files; one file may serve many samples. This module maps the files
that failed to decode back to every sample that uses them, in one error for the whole run.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from dualcog.errors import DataError
from dualcog.media.store import UnreadableMedia

# The manifest key each media role is read from (see dualcog.ingest).
_FIELD_BY_ROLE = {
    "reference": "reference_image_with_bbox",
    "target": "target_image",
    "video": "video_web_path (else video_path)",
}


def media_field(role: str) -> str:
    if role.startswith("candidate_"):
        return f"candidates[option_id={role[len('candidate_') :]}].image"
    return _FIELD_BY_ROLE.get(role, role)


def video_frame_counts(samples: pd.DataFrame) -> dict[str, int | None]:
    """Each video's frame count as the manifests state it (None where none is stated)."""
    counts: dict[str, int | None] = {}
    for media, count in zip(samples["media"], samples["frame_count"], strict=True):
        stated = None if pd.isna(count) else int(count)
        for item in media:
            if item["role"] == "video" and counts.get(item["resolved_path"]) is None:
                counts[item["resolved_path"]] = stated
    return counts


def bad_media_error(samples: pd.DataFrame, failures: Sequence[UnreadableMedia]) -> DataError:
    """One error listing every bad file with the samples using it, and how to go on."""
    reasons = {failure.source: failure.reason for failure in failures}
    lines: list[str] = []
    uses: list[tuple[str, str, str]] = []
    for manifest, sample_id, media in zip(
        samples["manifest_path"], samples["sample_id"], samples["media"], strict=True
    ):
        for item in media:
            reason = reasons.get(item["resolved_path"])
            if reason is None:
                continue
            field = media_field(item["role"])
            uses.append((manifest, sample_id, field))
            lines.append(
                f"  - manifest {manifest}, sample {sample_id}, field {field!r} "
                f"({item['path']}), media file {item['resolved_path']}: {reason}"
            )
    excluded = sorted({sample_id for _, sample_id, _ in uses})
    message = "\n".join(
        [
            f"{len(reasons)} media file(s) do not decode, used by {len(excluded)} sample(s):",
            *lines,
            "Every other media file was prepared and is kept. Replace the bad files, or leave "
            "these samples out of the run by adding to your config:",
            f"  exclude_samples: [{', '.join(excluded)}]",
        ]
    )
    if len(uses) == 1:
        manifest, sample_id, field = uses[0]
        return DataError(message, file=manifest, sample=sample_id, field=field)
    return DataError(message)
