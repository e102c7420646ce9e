"""Fetch the released benchmark from the Hugging Face Hub: pinned, verified, only what is read.

Evaluation reads the latest manifests, the images and videos their samples name (as ingest
resolves them) and the landmark reference views (`scene_data/<scene>/landmarks_raw/rgb_views/`);
the release also carries point-cloud maps, review assets and the non-web copies of the videos,
which are never fetched. The download runs in two steps: the manifests of the selected scenes
and modalities first (small), then what their samples of the selected tasks name. Both are
`huggingface_hub.snapshot_download` calls on a commit hash, into a plain folder (`local_dir`),
with `allow_patterns` that match exactly the wanted files of the revision's listing.

Every wanted file is then checked against the listing: its size, and the sha256 of an LFS file
or the git blob id of a regular one. A mismatched file is removed and the error names it with
the command that fetches it again; only when every file matches is the verification record
(`<folder>/.dualcog/download.json`) written, which ingest waits for and the stamp reports.
Files already in the folder are kept: a rerun fetches only what is missing, and a connection
dropped mid-file is resumed from the bytes received (huggingface_hub's ranged retry).
"""

from __future__ import annotations

import datetime as dt
import glob
import hashlib
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from dualcog.errors import ConfigError, DataError, DualCogError
from dualcog.ingest import IMAGE_MANIFEST_DIR, VIDEO_MANIFEST_DIR, find_manifests
from dualcog.tasks import REQUEST_BY_TASK, REQUEST_KINDS

# huggingface_hub and its HTTP stack are imported by the functions that talk to the Hub: the
# Snakefile imports this module, and every Snakemake start-up would load them.

log = logging.getLogger(__name__)

DEFAULT_REPO = "Lozumi/UAV-DualCog"
DEFAULT_INTO = "resources/UAV-DualCog"
DEFAULT_ENDPOINT = "https://huggingface.co"
RECORD_NAME = ".dualcog/download.json"
REPAIR_HINT = "rerun the download (`snakemake --cores 1 download`, with the same --configfile)"
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
# huggingface_hub keeps one `<path>.metadata` per fetched file here (local_dir mode)
_HF_METADATA_DIR = Path(".cache") / "huggingface" / "download"


def _layouts() -> dict[str, str]:
    """Manifest folders by modality. dualcog.ingest (pandas) is loaded here, not with the
    module: every stamp reads `release_stamp`, and the explorer's jobs load no pandas."""

    return {"image": IMAGE_MANIFEST_DIR, "video": VIDEO_MANIFEST_DIR}


class DownloadError(DualCogError):
    """The release could not be fetched or does not match the Hub's listing."""


@dataclass(frozen=True)
class DownloadSettings:
    into: Path
    revision: str
    repo: str = DEFAULT_REPO
    tasks: tuple[str, ...] = tuple(kind.task for kind in REQUEST_KINDS)
    scenes: tuple[str, ...] | None = None
    max_workers: int = 8


@dataclass(frozen=True)
class RemoteFile:
    """One file of the revision's listing: its size and what its bytes must hash to."""

    path: str
    size: int
    blob_id: str  # git blob id (of the LFS pointer, for an LFS file)
    sha256: str | None  # LFS object id; None for a file stored in git itself


def download_settings(config: Mapping[str, Any]) -> DownloadSettings:
    """The `download` section of a configuration, with `tasks` and the `revision` shorthand.

    A top-level `revision` (`--config revision=<hash>`) wins over `download.revision`.
    """
    section = config.get("download") or {}
    revision = config.get("revision") or section.get("revision")
    if not revision:
        raise ConfigError(
            "download.revision is not set: give the commit hash of the release to fetch "
            "(--config revision=<hash>), or `main` to follow the branch"
        )
    scenes = section.get("scenes")
    tasks = tuple(config.get("tasks") or DownloadSettings.tasks)
    unknown = sorted(set(tasks) - set(REQUEST_BY_TASK))
    if unknown:
        raise ConfigError(f"tasks: unknown request kinds {unknown}")
    return DownloadSettings(
        into=Path(section.get("into", DEFAULT_INTO)),
        revision=str(revision),
        repo=section.get("repo", DEFAULT_REPO),
        tasks=tasks,
        scenes=tuple(str(s) for s in scenes) if scenes else None,
        max_workers=int(section.get("max_workers", DownloadSettings.max_workers)),
    )


def record_path(folder: str | Path) -> Path:
    return Path(folder) / RECORD_NAME


def download_folder(config: Mapping[str, Any]) -> Path:
    return Path((config.get("download") or {}).get("into", DEFAULT_INTO))


def download_params(config: Mapping[str, Any]) -> dict[str, Any]:
    """The download section with the revision in effect, the same to Snakemake's rerun
    triggers wherever it was given: `--config revision=`, else `download.revision`, else the
    revision the folder's record was fetched at (a download pins its folder)."""
    section = config.get("download") or {}
    recorded = read_record(download_folder(config)) or {}
    revision = config.get("revision") or section.get("revision") or recorded.get("revision")
    return {**section, "revision": revision}


def download_record(config: Mapping[str, Any]) -> list[str]:
    """The verification record, as an input of the rules that read the data root when it is
    the download's folder (ingest then reads only files checked against the Hub), else []."""
    folder = download_folder(config)
    if Path(config["data_root"]).resolve() == folder.resolve():
        return [str(record_path(folder))]
    return []


def read_record(folder: str | Path) -> dict[str, Any] | None:
    """The verification record of a download into `folder`, or None if there is none."""
    path = record_path(folder)
    if not path.is_file():
        return None
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def release_stamp(data_root: str | Path) -> dict[str, Any] | None:
    """What a stamp says of a data root fetched by `download_release` (None otherwise)."""
    record = read_record(data_root)
    if record is None:
        return None
    keys = ("repo", "revision", "commit", "tasks", "scenes", "file_count", "bytes", "verified")
    return {key: record.get(key) for key in keys}


# -- selection ----------------------------------------------------------------------------
def covering_patterns(wanted: Iterable[str], listing: Iterable[str]) -> list[str]:
    """`allow_patterns` that match exactly `wanted` among the `listing`'s paths.

    A folder all of whose files are wanted becomes one `<folder>/*` pattern (huggingface_hub's
    `*` crosses `/`), the topmost such folder; any other wanted file is its own (escaped) path.
    A few patterns instead of one per file: huggingface_hub tests every listed path against
    every pattern.
    """
    wanted = set(wanted)
    total: dict[str, int] = {}
    hits: dict[str, int] = {}
    for path in listing:
        for folder in _folders(path):
            total[folder] = total.get(folder, 0) + 1
            if path in wanted:
                hits[folder] = hits.get(folder, 0) + 1
    patterns = set()
    for path in wanted:
        full = next((f for f in _folders(path) if hits.get(f) == total.get(f)), None)
        patterns.add(glob.escape(full) + "/*" if full else glob.escape(path))
    return sorted(patterns)


def _folders(path: str) -> list[str]:
    """The folders holding `path`, outermost first (the repo root excluded)."""
    parts = path.split("/")[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def _scene_matches(folder: str, scenes: Sequence[str] | None) -> bool:
    """`airsim_env_7` is selected by `airsim_env_7` or by its scene id `env_7`."""
    return scenes is None or folder in scenes or folder.partition("_")[2] in scenes


def manifest_folders(
    listing: Iterable[str], settings: DownloadSettings
) -> dict[str, tuple[str, str]]:
    """Manifest folder -> (modality, scene folder) for the selected scenes and modalities."""
    modalities = {REQUEST_BY_TASK[task].modality for task in settings.tasks}
    found: dict[str, tuple[str, str]] = {}
    seen_scenes: set[str] = set()
    for path in listing:
        parts = path.split("/")
        for modality, layout in _layouts().items():
            if len(parts) >= 4 and tuple(parts[-3:-1]) == layout and path.endswith(".json"):
                scene = parts[-4]
                seen_scenes.add(scene)
                if modality in modalities and _scene_matches(scene, settings.scenes):
                    found["/".join(parts[:-1])] = (modality, scene)
    if settings.scenes:
        known = {s for s in seen_scenes} | {s.partition("_")[2] for s in seen_scenes}
        unknown = sorted(set(settings.scenes) - known)
        if unknown:
            raise ConfigError(
                f"download.scenes: {unknown} not in the release (it has {sorted(seen_scenes)})"
            )
    if not found:
        raise DownloadError(
            "the release lists no manifests for the selected tasks and scenes (expected "
            "*/image_tasks/manifests/*.json or */video_tasks/datasets/*.json)"
        )
    return found


def media_read(sample: Mapping[str, Any], modality: str) -> list[tuple[str, str]]:
    """(field, path as written) of every media file ingest reads for one sample."""
    out: list[tuple[str, Any]] = [
        ("reference_image_with_bbox", sample.get("reference_image_with_bbox"))
    ]
    if modality == "image":
        if sample.get("task_type") == "self_what":
            for i, candidate in enumerate(sample.get("candidates") or []):
                if isinstance(candidate, Mapping):
                    out.append((f"candidates[{i}].image", candidate.get("image")))
        else:
            out.append(("target_image", sample.get("target_image")))
    else:
        key = "video_web_path" if sample.get("video_web_path") else "video_path"
        out.append((key, sample.get(key)))
    return [(field, value) for field, value in out if isinstance(value, str) and value]


def repo_path_of(written: str, task_root: str, listing: Mapping[str, Any] | set[str]) -> str | None:
    """The listed path a manifest's media path resolves to, as ingest resolves it on disk.

    The path as written under the repo root, else its suffixes (longest first) under the repo
    root, the task root (the folder holding the scene folders) and the folders above it.
    """
    parts = [p for p in PurePosixPath(written.replace("\\", "/")).parts if p not in ("/", "")]
    root = PurePosixPath(task_root)
    bases = ["", *(str(b) for b in (root, *root.parents) if str(b) != ".")]
    for start in range(len(parts)):
        suffix = "/".join(parts[start:])
        for base in bases:
            candidate = f"{base}/{suffix}" if base else suffix
            if candidate in listing:
                return candidate
    return None


def _sample_task(sample: Mapping[str, Any], modality: str) -> str | None:
    upstream = sample.get("task_type") if modality == "image" else None
    if modality == "video":
        upstream = sample.get("form") or sample.get("task_name")
    return next((k.task for k in REQUEST_KINDS if k.upstream == upstream), None)


def media_files(
    manifest: Path, repo_manifest: str, modality: str, settings: DownloadSettings, listing
) -> set[str]:
    """Listed paths of the media that the manifest's samples of the selected tasks name."""
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise DataError(f"not valid JSON ({error})", file=str(manifest)) from error
    samples = data.get("samples") if isinstance(data, Mapping) else None
    if not isinstance(samples, list):
        raise DataError("missing or non-list key", file=str(manifest), field="samples")
    task_root = "/".join(repo_manifest.split("/")[:-4])
    found = set()
    for index, sample in enumerate(samples):
        if not isinstance(sample, Mapping) or _sample_task(sample, modality) not in settings.tasks:
            continue  # ingest names what is wrong with a malformed sample
        for field, written in media_read(sample, modality):
            path = repo_path_of(written, task_root, listing)
            if path is None:
                raise DataError(
                    f"names {written}, which revision {settings.revision} of {settings.repo} "
                    "does not hold",
                    file=str(manifest),
                    sample=str(sample.get("sample_id") or f"#{index}"),
                    field=field,
                )
            found.add(path)
    return found


def reference_views(listing: Iterable[str], scenes: Iterable[str]) -> set[str]:
    """`.../<scene>/landmarks_raw/rgb_views/**` of the given scene folders."""
    scenes = set(scenes)
    found = set()
    for path in listing:
        parts = path.split("/")
        for i in range(len(parts) - 3):
            if parts[i] in scenes and parts[i + 1 : i + 3] == ["landmarks_raw", "rgb_views"]:
                found.add(path)
                break
    return found


# -- verification -------------------------------------------------------------------------
def file_problem(folder: Path, remote: RemoteFile) -> str | None:
    """Why the local copy of `remote` cannot be trusted, or None when it matches the Hub."""
    path = folder / remote.path
    if not path.is_file():
        return "missing"
    size = path.stat().st_size
    if size != remote.size:
        return f"{size} bytes, the Hub lists {remote.size}"
    if remote.sha256 is not None:
        digest = hashlib.sha256()
        expected, what = remote.sha256, "sha256"
    else:
        digest = hashlib.sha1(b"blob %d\0" % size)
        expected, what = remote.blob_id, "git blob id"
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    actual = digest.hexdigest()
    if actual != expected:
        return f"{what} {actual[:12]}…, the Hub lists {expected[:12]}…"
    return None


def verify(folder: Path, files: Iterable[RemoteFile], repo: str, commit: str) -> None:
    """Check every file; remove the mismatched ones and raise naming each, else return."""
    problems = [(remote, why) for remote in files if (why := file_problem(folder, remote))]
    if not problems:
        return
    lines = []
    for remote, why in sorted(problems, key=lambda item: item[0].path):
        if why != "missing":
            _forget(folder, remote.path)
            why += " (removed)"
        lines.append(f"  {folder / remote.path}: {why}")
    raise DownloadError(
        f"{len(problems)} file(s) do not match {repo} at {commit}:\n"
        + "\n".join(lines)
        + f"\nTo repair, {REPAIR_HINT}: it fetches these files again and checks every file."
    )


def _forget(folder: Path, path: str) -> None:
    """Remove a fetched file and huggingface_hub's note of it, so a rerun fetches it again."""
    (folder / path).unlink(missing_ok=True)
    (folder / _HF_METADATA_DIR / f"{path}.metadata").unlink(missing_ok=True)


def _remove_unselected(folder: Path, keep: set[str]) -> int:
    """Remove files an earlier download wrote that this selection or revision does not hold."""
    notes = folder / _HF_METADATA_DIR
    removed = 0
    for note in notes.rglob("*.metadata") if notes.is_dir() else ():
        path = note.relative_to(notes).as_posix()[: -len(".metadata")]
        if path not in keep:
            _forget(folder, path)
            removed += 1
    return removed


# -- progress -----------------------------------------------------------------------------
def human_bytes(count: float) -> str:
    if abs(count) < 1000:
        return f"{count:.0f} B"
    for unit in ("kB", "MB", "GB"):
        count /= 1000
        if abs(count) < 1000 or unit == "GB":
            return f"{count:.1f} {unit}"
    raise AssertionError("unreachable")


class ByteProgress:
    """Bytes received against a known total, logged as one line every `every_s` seconds."""

    def __init__(
        self, total: int, every_s: float = 10.0, clock: Callable[[], float] = time.monotonic
    ):
        self.total, self.every_s, self.clock = total, every_s, clock
        self.done = 0
        self.started = self.last = clock()
        self.lock = threading.Lock()

    def add(self, count: int) -> None:
        with self.lock:
            self.done += count
            now = self.clock()
            if now - self.last >= self.every_s:
                self.last = now
                log.info("downloaded %s", self.line(now))

    def line(self, now: float | None = None) -> str:
        elapsed = max((now or self.clock()) - self.started, 1e-9)
        done = min(max(self.done, 0), self.total)
        rate = done / elapsed
        left = self.total - done
        eta = str(dt.timedelta(seconds=round(left / rate))) if rate > 0 else "unknown"
        share = 100.0 * done / self.total if self.total else 100.0
        return (
            f"{human_bytes(done)} of {human_bytes(self.total)} ({share:.0f} %), "
            f"{human_bytes(rate)}/s, ETA {eta}"
        )


def _bar_class(progress: ByteProgress) -> type:
    """A tqdm class for snapshot_download that feeds `progress` and draws nothing."""
    from huggingface_hub.utils import tqdm as hub_tqdm

    class LoggedBar(hub_tqdm):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            # The bar that snapshot_download adds every file's received bytes to.
            self._counts = kwargs.get("name") == "huggingface_hub.snapshot_download"
            kwargs.update(disable=False, file=open(os.devnull, "w"))  # noqa: SIM115
            super().__init__(*args, **kwargs)

        def update(self, n: float | None = 1) -> bool | None:
            if self._counts and n:
                progress.add(int(n))
            return super().update(n)

        def close(self) -> None:
            super().close()
            self.fp.close()

    return LoggedBar


# -- the download -------------------------------------------------------------------------
# huggingface_hub's loggers that warn on every retry: a file cut off or not reachable is
# retried up to five times, each with two lines, by each of the parallel workers.
_RETRY_LOGGERS = ("huggingface_hub.file_download", "huggingface_hub.utils._http")
_RETRY_REASON = re.compile(
    r"^(?:Error while downloading from (?P<url>\S+): (?P<error>.*?)\n(?:Trying to resume download"
    r"\.\.\.|Max retries exceeded\.)|'(?P<error2>.*)' thrown while requesting \S+ (?P<url2>\S+)|"
    r"(?P<wait>Retrying in .*|Rate limited\..*))$",
    re.S,
)


class RetryOnce(logging.Filter):
    """Say once that huggingface_hub retries, with the first reason and URL; drop its other
    retry warnings (the same connection failing again, its "Retrying in 1s" lines and its final
    "Max retries exceeded": the download's own error then says what failed and what to do)."""

    def __init__(self) -> None:
        super().__init__()
        self.said = False
        self.dropped = 0

    def filter(self, record: logging.LogRecord) -> bool:
        match = _RETRY_REASON.match(record.getMessage())
        if match is None:
            return True
        if self.said or match.group("wait"):
            self.dropped += 1
            return False
        self.said = True
        error = (match.group("error") or match.group("error2") or "").splitlines()
        url = match.group("url") or match.group("url2")
        record.msg = (
            f"the Hub did not answer for {url} ({error[0] if error else 'no reason given'}): "
            "retrying; each file is resumed up to 5 times (further retries are not shown)"
        )
        record.args = ()
        return True


def _hub_call(what: str, call: Callable[[], Any], endpoint: str) -> Any:
    import httpx2
    from huggingface_hub.errors import HfHubHTTPError

    try:
        return call()
    except (HfHubHTTPError, httpx2.HTTPError, OSError, ValueError) as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        status = getattr(getattr(error, "response", None), "status_code", None)
        advice = "Files fetched so far are kept; rerun the download to resume."
        if status in (401, 403):
            advice = "Set HF_TOKEN to a token that may read the dataset."
        raise DownloadError(f"{what} from {endpoint} failed: {reason}. {advice}") from None


def list_release(
    api: Any, repo: str, revision: str, endpoint: str
) -> tuple[str, dict[str, RemoteFile]]:
    """(commit hash of `revision`, listing of every file at that commit)."""
    from huggingface_hub.hf_api import RepoFile

    commit = revision
    if not _COMMIT.fullmatch(revision):
        info = _hub_call(
            f"resolving revision {revision} of {repo}",
            lambda: api.dataset_info(repo, revision=revision),
            endpoint,
        )
        commit = info.sha
    entries = _hub_call(
        f"listing {repo} at {commit}",
        lambda: list(
            api.list_repo_tree(repo, repo_type="dataset", revision=commit, recursive=True)
        ),
        endpoint,
    )
    listing = {
        e.path: RemoteFile(e.path, e.size, e.blob_id, e.lfs.sha256 if e.lfs else None)
        for e in entries
        if isinstance(e, RepoFile)
    }
    return commit, listing


def download_release(
    settings: DownloadSettings, *, progress_every_s: float = 10.0
) -> dict[str, Any]:
    """Fetch and verify the selected part of the release; return the record it wrote.

    The Hub is `HF_ENDPOINT` (default huggingface.co), the credentials `HF_TOKEN` (or the
    token huggingface_hub has stored), both read when called. huggingface_hub's retry warnings
    are said once (`RetryOnce`).
    """
    retries = RetryOnce()
    for name in _RETRY_LOGGERS:
        logging.getLogger(name).addFilter(retries)
    try:
        return _download(settings, progress_every_s)
    finally:
        for name in _RETRY_LOGGERS:
            logging.getLogger(name).removeFilter(retries)


def _download(settings: DownloadSettings, progress_every_s: float) -> dict[str, Any]:
    from huggingface_hub import HfApi, snapshot_download

    endpoint = os.environ.get("HF_ENDPOINT", "").rstrip("/") or DEFAULT_ENDPOINT
    token = os.environ.get("HF_TOKEN") or None
    api = HfApi(endpoint=endpoint, token=token)
    into = settings.into
    commit, listing = list_release(api, settings.repo, settings.revision, endpoint)

    def fetch(paths: set[str], what: str, progress: ByteProgress | None = None) -> None:
        _hub_call(
            f"fetching {what} of {settings.repo} at {commit}",
            lambda: snapshot_download(
                settings.repo,
                repo_type="dataset",
                revision=commit,
                local_dir=into,
                allow_patterns=covering_patterns(paths, listing),
                endpoint=endpoint,
                token=token,
                max_workers=settings.max_workers,
                tqdm_class=_bar_class(progress or ByteProgress(0, float("inf"))),
            ),
            endpoint,
        )
        verify(into, (listing[p] for p in sorted(paths)), settings.repo, commit)

    folders = manifest_folders(listing, settings)
    manifests = {p for p in listing if p.rsplit("/", 1)[0] in folders and p.endswith(".json")}
    log.info(
        "%s at %s (%s): fetching %d manifest files (%s) into %s",
        settings.repo, commit, settings.revision, len(manifests),
        human_bytes(sum(listing[p].size for p in manifests)), into,
    )  # fmt: skip
    fetch(manifests, "the manifests")

    wanted = set(manifests)
    scenes = {scene for _, scene in folders.values()}
    for manifest in find_manifests(into):
        repo_manifest = manifest.path.relative_to(into).as_posix()
        folder = repo_manifest.rsplit("/", 1)[0]
        if folder in folders:
            wanted |= media_files(
                manifest.path, repo_manifest, folders[folder][0], settings, listing
            )
    if any(REQUEST_BY_TASK[t].modality == "image" for t in settings.tasks):
        wanted |= reference_views(listing, scenes)

    total = sum(listing[p].size for p in wanted)
    here = sum(listing[p].size for p in wanted if _same_size(into / p, listing[p].size))
    log.info(
        "%d files, %s for %s on %d scene(s) (%s); %s already here, %s to download",
        len(wanted), human_bytes(total), ", ".join(settings.tasks), len(scenes),
        ", ".join(sorted(scenes)), human_bytes(here), human_bytes(total - here),
    )  # fmt: skip
    progress = ByteProgress(total - here, progress_every_s)
    fetch(wanted, "the selected files", progress)
    log.info("downloaded %s", progress.line())
    removed = _remove_unselected(into, wanted)
    if removed:
        log.info("removed %d file(s) of an earlier download outside this selection", removed)

    record = {
        "repo": settings.repo,
        "revision": settings.revision,
        "commit": commit,
        "tasks": list(settings.tasks),
        "scenes": sorted(scenes),
        "file_count": len(wanted),
        "bytes": total,
        "verified": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "files": {p: {"size": listing[p].size, **_hash_of(listing[p])} for p in sorted(wanted)},
    }
    path = record_path(into)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(path)
    log.info("verified %d files (%s) against %s at %s", len(wanted), human_bytes(total),
             settings.repo, commit)  # fmt: skip
    return record


def _same_size(path: Path, size: int) -> bool:
    return path.is_file() and path.stat().st_size == size


def _hash_of(remote: RemoteFile) -> dict[str, str]:
    return {"sha256": remote.sha256} if remote.sha256 else {"git_blob_id": remote.blob_id}
