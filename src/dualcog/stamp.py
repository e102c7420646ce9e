"""Result stamps: which code, settings and data produced a number.

A stamp is a small JSON object written beside every output a person reads (tables, the
leaderboard, the explorer, `metrics.parquet` metadata). Its per-model entry is a digest of
only that model's answer-deciding settings (`dualcog.config.model_fingerprint`), its scoring
settings and the files its backend reads, so changing one model changes one entry.

The git commit and the date describe the checkout and moment that wrote the stamp; they are
recorded, not triggers (a new commit that changes no stage version reruns nothing).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import subprocess
import tomllib
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from dualcog import atomic
from dualcog.backends import input_files, is_served
from dualcog.config import model_fingerprint
from dualcog.digests import file_digest
from dualcog.download import release_stamp
from dualcog.errors import ConfigError
from dualcog.serving import facts as served_facts
from dualcog.versions import (
    INGEST_VERSION,
    PARSER_VERSION,
    PROTOCOL_REVISION,
    RENDER_VERSION,
    SCORER_VERSION,
    TABLES_VERSION,
)

# pyarrow.parquet is imported by the functions that read Parquet: the Snakefile imports this
# module (STAGE_VERSIONS, model_entry), and every Snakemake start-up would load pyarrow.

SOURCE_ROOT = Path(__file__).resolve().parents[2]
METADATA_KEY = b"dualcog.stamp"  # Parquet schema metadata key holding the stamp JSON

STAGE_VERSIONS = {
    "ingest": INGEST_VERSION,
    "render": RENDER_VERSION,
    "parser": PARSER_VERSION,
    "scorer": SCORER_VERSION,
    "tables": TABLES_VERSION,
}


def project_version(root: Path = SOURCE_ROOT) -> str:
    """The version in the checkout's pyproject.toml, else the installed package's."""
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        with open(pyproject, "rb") as handle:
            version = tomllib.load(handle).get("project", {}).get("version")
        if version:
            return str(version)

    try:
        return metadata.version("dualcog")
    except metadata.PackageNotFoundError:
        return "unknown"


def git_state(root: Path = SOURCE_ROOT) -> dict[str, Any] | None:
    """Commit of the checkout holding the code, and whether tracked files differ from it.

    None outside a git checkout or without git: a stamp never fails for want of it.
    """

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "-C", str(root), *args],
                capture_output=True,
                text=True,
                timeout=10,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    if not (root / ".git").exists():
        return None  # the code is not the top of a checkout (e.g. an installed wheel)
    # One git process (each costs a few ms, and every explorer job stamps its page): the
    # commit is the status's `branch.oid` header, and any other line is a modified file.
    status = git("status", "--porcelain=v2", "--branch", "--untracked-files=no")
    if status is None:
        return None
    lines = status.splitlines()
    commit = next((line.split()[2] for line in lines if line.startswith("# branch.oid ")), None)
    if not commit or commit == "(initial)":
        return None
    return {"commit": commit, "dirty": any(not line.startswith("#") for line in lines)}


def model_entry(model: Mapping[str, Any]) -> dict[str, Any]:
    """What decides one model's scores: answer settings, scoring settings, the files its
    backend reads (`backends.input_files`: a replayed run's recorded responses), and for a
    served model the facts its inference job recorded (`dualcog.serving.facts`).

    `inputs` and `served` are paths, so `build_stamp` can digest and read the files.
    """

    entry = {
        "backend": model.get("backend"),
        "answer_settings_digest": model_fingerprint(model),
        "bbox_scale": model.get("bbox_scale"),
        "inputs": input_files(model),
    }
    if is_served(model):
        entry["served"] = served_facts.facts_path(str(model["name"]))
    return entry


def request_set_digest(paths: Sequence[str | Path]) -> dict[str, Any]:
    """One digest of the requests a model run posted (PROTOCOL §11.5): over its RESPONSES files'
    (task, sample_id, request_sha256) rows that have a record, in sorted order; with the count.
    Two runs that sent byte-identical bodies for the same samples have the same digest."""
    import pyarrow.parquet as pq

    lines = []
    for path in paths:
        table = pq.read_table(path, columns=["task", "sample_id", "request_sha256"])
        for task, sample, sha in zip(*(table.column(i).to_pylist() for i in range(3)), strict=True):
            if sha is not None:
                lines.append(f"{task}\t{sample}\t{sha}\n")
    digest = hashlib.sha256("".join(sorted(lines)).encode()).hexdigest()[:16]
    return {"requests": len(lines), "digest": digest}


def _model_stamp(
    entry: Mapping[str, Any], base: Path, requests: Sequence[str | Path] | None = None
) -> dict[str, Any]:
    inputs = {
        str(path): file_digest(path if Path(path).is_absolute() else base / path)
        for path in entry.get("inputs") or []
    }
    payload = {
        "answer_settings_digest": entry["answer_settings_digest"],
        "bbox_scale": entry.get("bbox_scale"),
        "inputs": inputs,
    }
    if entry.get("served"):  # what the server was, as its job recorded it (in the digest)
        path = Path(entry["served"])
        facts = served_facts.read_facts(path if path.is_absolute() else base / path)
        payload["served"] = served_facts.stamp_view(facts)
    if requests:  # the bodies a run that sends requests posted (in the digest)
        payload["request_set"] = request_set_digest(
            [path if Path(path).is_absolute() else base / path for path in requests]
        )
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]
    return {"digest": digest, "backend": entry.get("backend"), **payload}


def manifest_digests(manifests: Sequence[str | Path], data_root: str | Path) -> dict[str, str]:
    """SHA-256 of each manifest file, keyed by its path relative to the data root."""
    root = Path(data_root).resolve()
    out = {}
    for path in sorted(Path(p) for p in manifests):
        resolved = path.resolve()
        key = resolved.relative_to(root) if resolved.is_relative_to(root) else path
        out[key.as_posix()] = file_digest(path)
    return out


def data_stamp(manifests: Sequence[str | Path], data_root: str | Path) -> dict[str, Any]:
    """A stamp's `data` entry: each manifest's digest and one digest of them all. Written once
    per run (results/data_stamp.json) for the per-model pages, so that each does not hash the
    manifests again (24 MB at the paper's scale, 0.04 CPU-s a job)."""
    data = manifest_digests(manifests, data_root)
    return {
        "digest": hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16],
        "manifests": data,
    }


def creation_time() -> dt.datetime:
    """Now, or the time pinned by SOURCE_DATE_EPOCH (reproducible-builds.org), so that two runs
    of the same inputs, e.g. a local and a cluster run, can write byte-identical outputs."""
    pinned = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if pinned:
        try:
            return dt.datetime.fromtimestamp(int(pinned), dt.UTC)
        except (ValueError, OverflowError, OSError) as error:
            raise ConfigError(f"SOURCE_DATE_EPOCH={pinned!r} is not a Unix time") from error
    return dt.datetime.now(dt.UTC)


def build_stamp(
    models: Mapping[str, Mapping[str, Any]],
    manifests: Sequence[str | Path],
    data_root: str | Path,
    *,
    now: dt.datetime | None = None,
    base: str | Path = ".",
    root: Path = SOURCE_ROOT,
    data: Mapping[str, Any] | None = None,
    requests: Mapping[str, Sequence[str | Path]] | None = None,
) -> dict[str, Any]:
    """The stamp of outputs computed from `models` (name -> `model_entry`) and `manifests`.

    `requests`: per model that sends requests, its RESPONSES files, whose request records
    are digested into its entry (`request_set_digest`).

    Relative input and served-facts paths are read from `base` (the workflow's working
    directory). `data`: the manifests' `data_stamp` when already made (then `manifests` is
    not read).
    """

    now = now or creation_time()
    if data is None:
        data = data_stamp(manifests, data_root)
    return {
        "project": "dualcog",
        "version": project_version(root),
        "git": git_state(root),
        "protocol_revision": PROTOCOL_REVISION,
        "stage_versions": dict(STAGE_VERSIONS),
        "models": {
            name: _model_stamp(entry, Path(base), (requests or {}).get(name))
            for name, entry in models.items()
        },
        "data": dict(data),
        "release": release_stamp(data_root),
        "created": now.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def stamp_for_models(stamp: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """The same stamp restricted to some models (an output about one model)."""
    return {**stamp, "models": {n: stamp["models"][n] for n in names if n in stamp["models"]}}


def short_commit(stamp: Mapping[str, Any]) -> str:
    """The commit's first 12 digits (and whether the tree was modified), or that there was none."""
    git = stamp.get("git")
    if not git:
        return "no git checkout"
    return git["commit"][:12] + (" (modified)" if git.get("dirty") else "")


def stamp_summary(stamp: Mapping[str, Any]) -> str:
    """One line for a human: version, commit, protocol, stage versions, data digest, date."""
    commit = f"commit {short_commit(stamp)}" if stamp.get("git") else short_commit(stamp)
    versions = stamp.get("stage_versions", {})
    return (
        f"dualcog {stamp.get('version')} ({commit}); protocol revision "
        f"{stamp.get('protocol_revision')}; {versions.get('parser')}, {versions.get('scorer')}; "
        f"data {stamp.get('data', {}).get('digest')}; created {stamp.get('created')}"
    )


STAMP_PATH = "results/stamp.json"  # where the workflow writes the full stamp


def stamp_digest(stamp: Mapping[str, Any]) -> str:
    """16 hex digits identifying the whole stamp (every model's entry included)."""
    return hashlib.sha256(json.dumps(stamp, sort_keys=True, default=str).encode()).hexdigest()[:16]


def stamp_line(stamp: Mapping[str, Any], path: str = STAMP_PATH) -> str:
    """One short line for a table: the digest, the summary and where the full stamp is.

    Its length does not grow with the number of models (a 45-run stamp is 200 kB of JSON,
    more than TeX reads on one line).
    """
    return f"dualcog stamp {stamp_digest(stamp)}: {stamp_summary(stamp)}; full stamp: {path}"


def stamp_rows(stamp: Mapping[str, Any], path: str = STAMP_PATH) -> list[tuple[str, str]]:
    """(label, value) rows of a readable provenance table for the HTML pages."""
    commit = short_commit(stamp)
    versions = stamp.get("stage_versions", {})
    models = stamp.get("models", {})
    data = stamp.get("data", {})
    # A served model's own page also shows what its server was (dualcog.serving.facts).
    served = next(iter(models.values())).get("served") if len(models) == 1 else None
    return [
        ("Stamp digest", stamp_digest(stamp)),
        ("dualcog version", str(stamp.get("version"))),
        ("Git commit", commit),
        ("Protocol revision", str(stamp.get("protocol_revision"))),
        ("Stage versions", ", ".join(f"{k} {v}" for k, v in sorted(versions.items()))),
        *(
            [
                (f"Model {name}", f"settings digest {entry['digest']}")
                for name, entry in models.items()
            ]
            if len(models) == 1  # a model's own page: its settings, so no other model's change
            else [("Models", f"{len(models)} (settings digests in the full stamp)")]
        ),
        *(served_facts.fact_rows(served) if served else []),
        ("Data", f"{len(data.get('manifests', {}))} manifests, digest {data.get('digest')}"),
        ("Created", str(stamp.get("created"))),
        ("Full stamp", path),
    ]


def model_digests_line(stamp: Mapping[str, Any]) -> str:
    models = stamp.get("models", {})
    return "Model settings digests: " + ", ".join(
        f"{name} {entry['digest']}" for name, entry in models.items()
    )


def read_stamp(path: str | Path) -> dict[str, Any]:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def write_stamp(stamp: Mapping[str, Any], path: str | Path) -> None:
    atomic.write_text(path, json.dumps(stamp, indent=2, sort_keys=True) + "\n")


def stamp_metadata(path: str | Path) -> dict[bytes, bytes]:
    """Parquet schema metadata carrying the stamp file's JSON."""
    return {METADATA_KEY: json.dumps(read_stamp(path), sort_keys=True).encode()}


def parquet_stamp(path: str | Path) -> dict[str, Any] | None:
    """The stamp stored in a Parquet file's schema metadata, if any."""
    import pyarrow.parquet as pq

    metadata = pq.read_schema(path).metadata or {}
    raw = metadata.get(METADATA_KEY)
    return json.loads(raw) if raw else None
