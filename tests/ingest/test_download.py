"""The `download` target against a loopback fake of the Hub serving the demo benchmark.

huggingface_hub talks only to the fake here: every call gets HF_ENDPOINT pointing at it,
HF_HOME is a temporary folder and offline mode is off.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pandas as pd
import pytest
from demo_fixtures import DEMO, DEMO_MODELS, DEMO_RECORDED_RUNS, RECORDED
from fake_hub import FakeHub, card_layout, unread_paths
from hypothesis import given, settings
from hypothesis import strategies as st
from workflow_runner import run_snakemake, write_config

from dualcog.download import (
    REPAIR_HINT,
    DownloadError,
    DownloadSettings,
    RemoteFile,
    covering_patterns,
    download_params,
    download_release,
    download_settings,
    file_problem,
    human_bytes,
    read_record,
    repo_path_of,
)
from dualcog.errors import ConfigError
from dualcog.ingest import ingest

REPO_ID = "Lozumi/UAV-DualCog"
FILES = card_layout(DEMO)
A_VIDEO = (
    "task_data/airsim_env_7/video_tasks/missions/batch_env_7_12_atomic_0002_fill_01/"
    "final_task/task_rgb_web.mp4"
)
AN_IMAGE = "scene_data/airsim_env_12/landmarks_raw/rgb_views/3/view_04_back.jpg"


@pytest.fixture
def hub(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with FakeHub(REPO_ID, FILES) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        yield server


def fetch(into: Path, revision: str, **selection) -> dict:
    return download_release(
        DownloadSettings(into=into, revision=revision, **selection), progress_every_s=0
    )


def demo_bytes(repo_path: str) -> bytes:
    """The demo file a card-layout path was made from."""
    if repo_path.startswith("task_data/"):
        repo_path = "task_pipeline_data/UAV-DualCog-V1/" + repo_path.removeprefix("task_data/")
    return (DEMO / repo_path).read_bytes()


def local_files(into: Path) -> set[str]:
    return {
        p.relative_to(into).as_posix()
        for p in into.rglob("*")
        if p.is_file() and not p.relative_to(into).parts[0].startswith(".")
    }


def comparable(samples: pd.DataFrame) -> pd.DataFrame:
    """A samples table without the columns that name where its files are."""
    frame = samples.drop(columns=["manifest_path", "media"]).sort_values("sample_id")
    return frame.reset_index(drop=True).astype(str)


# -- selection, pure ----------------------------------------------------------------------
LISTING = sorted(FILES)


@settings(max_examples=60, deadline=None)
@given(st.sets(st.sampled_from(LISTING + ["odd [x]/a*.jpg", "odd [x]/b?.jpg"])))
def test_covering_patterns_match_exactly_the_wanted_files(wanted):
    from huggingface_hub.utils import filter_repo_objects

    listing = [*LISTING, "odd [x]/a*.jpg", "odd [x]/b?.jpg"]
    patterns = covering_patterns(wanted, listing)
    assert set(filter_repo_objects(listing, allow_patterns=patterns or ["(?!)"])) == wanted
    assert len(patterns) <= len(wanted)


def test_a_whole_folder_is_one_pattern():
    wanted = {p for p in LISTING if p.startswith("scene_data/airsim_env_7/landmarks_raw/")}
    assert covering_patterns(wanted, LISTING) == ["scene_data/airsim_env_7/landmarks_raw/*"]


def test_media_paths_resolve_like_ingest_resolves_them():
    listing = set(FILES)
    authors = "task_pipeline_data/UAV-DualCog-V1/airsim_env_7/image_tasks/assets/x.jpg"
    listing.add("task_data/airsim_env_7/image_tasks/assets/x.jpg")
    assert repo_path_of(authors, "task_data", listing) == (
        "task_data/airsim_env_7/image_tasks/assets/x.jpg"
    )
    absolute = "/home/authors/ws/" + AN_IMAGE
    assert repo_path_of(absolute, "task_data", listing) == AN_IMAGE
    assert repo_path_of("scene_data/airsim_env_7/none.jpg", "task_data", listing) is None


def test_a_local_copy_is_checked_by_size_and_hash(tmp_path):
    data = b'{"samples": []}'
    (tmp_path / "m.json").write_bytes(data)
    blob = __import__("hashlib").sha1(b"blob %d\0" % len(data) + data).hexdigest()
    assert file_problem(tmp_path, RemoteFile("m.json", len(data), blob, None)) is None
    assert "git blob id" in file_problem(tmp_path, RemoteFile("m.json", len(data), "0" * 40, None))
    assert "the Hub lists 99" in file_problem(tmp_path, RemoteFile("m.json", 99, blob, None))
    assert file_problem(tmp_path, RemoteFile("gone.json", 1, blob, None)) == "missing"
    assert "sha256" in file_problem(tmp_path, RemoteFile("m.json", len(data), blob, "ab" * 32))


def test_the_revision_must_be_given():
    with pytest.raises(ConfigError, match="download.revision is not set"):
        download_settings({"download": {"into": "x"}})
    chosen = download_settings({"revision": "main", "download": {"revision": "f" * 40}})
    assert chosen.revision == "main"  # the command line's shorthand wins
    # Given on the command line or in the file, the rule sees the same parameters.
    shorthand = download_params({"revision": "f" * 40, "download": {"into": "x"}})
    assert shorthand == download_params({"download": {"into": "x", "revision": "f" * 40}})


# -- against the fake Hub -----------------------------------------------------------------
def test_full_fetch_holds_what_evaluation_reads_and_nothing_else(hub, tmp_path, caplog):
    into = tmp_path / "release"
    with caplog.at_level(logging.INFO, logger="dualcog.download"):
        record = fetch(into, hub.commit)
    wanted = set(FILES) - unread_paths(FILES)
    assert hub.fetched_paths() == wanted
    assert local_files(into) == wanted
    assert all((into / p).read_bytes() == demo_bytes(p) for p in wanted)
    assert record == read_record(into)
    # The folder pins its revision: a configuration without one gets the recorded one.
    assert download_params({"download": {"into": str(into)}})["revision"] == hub.commit
    assert (record["commit"], record["file_count"]) == (hub.commit, len(wanted))
    assert record["bytes"] == sum(len(FILES[p]) for p in wanted)
    lines = [r.getMessage() for r in caplog.records]
    planned = next(line for line in lines if " to download" in line)
    manifests = sum(len(FILES[p]) for p in wanted if p.endswith(".json"))
    left = record["bytes"] - manifests
    assert planned.startswith(f"{len(wanted)} files, {human_bytes(record['bytes'])} for ")
    assert f"{human_bytes(manifests)} already here, {human_bytes(left)} to download" in planned
    assert any("ETA" in line and "(100 %)" in line for line in lines)
    # What was fetched ingests to the same samples as the embedded demo.
    pd.testing.assert_frame_equal(
        comparable(ingest(into)[0].to_pandas()), comparable(ingest(DEMO)[0].to_pandas())
    )
    # A second run finds every file in place and fetches no byte again.
    before = len(hub.requests)
    fetch(into, hub.commit)
    content = [r for r in hub.requests[before:] if r.method == "GET" and "/api/" not in r.path]
    assert content == []


def test_a_connection_dropped_mid_file_resumes_from_the_bytes_received(hub, tmp_path, monkeypatch):
    from huggingface_hub import constants

    # Several chunks per demo-sized file, as a real video spans many 10 MB chunks.
    monkeypatch.setattr(constants, "DOWNLOAD_CHUNK_SIZE", 1024)
    hub.drop_once.add(A_VIDEO)
    into = tmp_path / "release"
    fetch(into, hub.commit, tasks=("behavior",), scenes=("env_7",))
    gets = hub.content_gets(A_VIDEO)
    assert len(gets) == 2 and gets[0].range is None
    start = int(gets[1].range.removeprefix("bytes=").rstrip("-"))
    assert 0 < start <= len(FILES[A_VIDEO]) // 2
    assert (into / A_VIDEO).read_bytes() == FILES[A_VIDEO]


def test_retries_of_a_file_that_never_arrives_are_said_once(hub, tmp_path, monkeypatch, caplog):
    from huggingface_hub import file_download

    monkeypatch.setattr(file_download.time, "sleep", lambda s: None)  # its 1 s between tries
    hub.drop_always.add(AN_IMAGE)
    with caplog.at_level(logging.INFO), pytest.raises(DownloadError, match="rerun the download"):
        fetch(tmp_path / "release", hub.commit, scenes=("env_12",))
    assert len(hub.content_gets(AN_IMAGE)) == 6  # the first try and huggingface_hub's 5 retries
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    retries = [m for m in warnings if "retr" in m.lower()]
    assert len(retries) == 1, warnings
    assert retries[0].startswith("the Hub did not answer for http://127.0.0.1:")
    assert "\n" not in retries[0] and "Max retries" not in " ".join(warnings)


def test_an_interrupted_download_resumes_where_it_stopped(hub, tmp_path):
    into = tmp_path / "release"
    hub.broken.add(A_VIDEO)
    with pytest.raises(DownloadError, match="rerun the download to resume"):
        fetch(into, hub.commit, tasks=("behavior",))
    assert read_record(into) is None  # nothing is trusted yet
    kept = local_files(into)
    assert kept and A_VIDEO not in kept
    hub.broken.clear()
    fetch(into, hub.commit, tasks=("behavior",))
    assert read_record(into) is not None
    assert len(hub.content_gets(A_VIDEO)) == 2
    assert all(len(hub.content_gets(p)) == 1 for p in kept)  # none fetched twice


def test_a_corrupted_file_is_named_removed_and_fetched_again(hub, tmp_path):
    into = tmp_path / "release"
    hub.corrupt.add(AN_IMAGE)
    with pytest.raises(DownloadError) as caught:
        fetch(into, hub.commit, scenes=("env_12",))
    message = str(caught.value)
    assert str(into / AN_IMAGE) in message and "sha256" in message and "(removed)" in message
    assert REPAIR_HINT in message and message.startswith("1 file(s) do not match")
    assert not (into / AN_IMAGE).exists() and read_record(into) is None
    hub.corrupt.clear()
    fetch(into, hub.commit, scenes=("env_12",))
    assert (into / AN_IMAGE).read_bytes() == FILES[AN_IMAGE]
    assert len(hub.content_gets(AN_IMAGE)) == 2


def test_tasks_and_scenes_decide_what_is_fetched(hub, tmp_path):
    into = tmp_path / "release"
    record = fetch(into, "main", tasks=("landmark_visibility",), scenes=("env_12",))
    assert record["revision"] == "main" and record["commit"] == hub.commit
    fetched = hub.fetched_paths()
    assert all(p.startswith("task_data/airsim_env_12/video_tasks/") for p in fetched)
    samples = ingest(into, tasks=["landmark_visibility"])[0].to_pandas()
    assert len(samples) == 8 and set(samples["scene_id"]) == {"env_12"}
    named = {m["resolved_path"] for media in samples["media"] for m in media}
    manifests = {p for p in fetched if "/datasets/" in p}
    assert {Path(p).relative_to(into).as_posix() for p in named} | manifests == fetched
    # Narrowing the selection removes what an earlier download brought and it no longer reads.
    fetch(into, "main", tasks=("behavior",), scenes=("env_12",))
    assert not any("image_tasks" in p for p in local_files(into))


def test_an_unknown_scene_or_revision_is_named(hub, tmp_path):
    with pytest.raises(ConfigError, match=r"\['env_99'\] not in the release"):
        fetch(tmp_path / "r", hub.commit, scenes=("env_99",))
    with pytest.raises(DownloadError, match="resolving revision v9 .* failed"):
        fetch(tmp_path / "r", "v9")
    with pytest.raises(DownloadError, match=f"listing {REPO_ID} at {'a' * 40} .* failed"):
        fetch(tmp_path / "r", "a" * 40)


def test_an_unreachable_hub_is_named(hub, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # the discard port: refused
    with pytest.raises(DownloadError, match="from http://127.0.0.1:9 failed: .*rerun the download"):
        fetch(tmp_path / "r", "main")


def test_the_token_in_hf_token_is_sent_and_never_shown(hub, tmp_path, monkeypatch, caplog):
    hub.token = "hf_secret_test_token"
    with pytest.raises(DownloadError, match="401 Unauthorized.*Set HF_TOKEN") as caught:
        fetch(tmp_path / "r", hub.commit, tasks=("behavior",), scenes=("env_7",))
    assert hub.token not in str(caught.value)
    monkeypatch.setenv("HF_TOKEN", hub.token)
    with caplog.at_level(logging.DEBUG):
        fetch(tmp_path / "r", hub.commit, tasks=("behavior",), scenes=("env_7",))
    authorized = [r for r in hub.requests if r.authorization == f"Bearer {hub.token}"]
    assert authorized and hub.token not in caplog.text
    assert hub.token not in (tmp_path / "r" / ".dualcog" / "download.json").read_text()


# -- the workflow ---------------------------------------------------------------------------
@pytest.mark.workflow
def test_the_workflow_scores_what_it_fetched_as_it_scores_the_demo(hub, tmp_path, demo_workflow):
    """`snakemake download`, then the workflow on the download; its metrics are those of the
    shared demo run (on resources/demo) for the same models."""
    models = [m for m in DEMO_MODELS if m["name"] in ("oracle", "random")]
    # The models' settings as in the demo run; the recorded run read from resources/demo.
    models.append(
        {"name": RECORDED, "backend": "replay", "replay": list(map(str, DEMO_RECORDED_RUNS))}
    )
    base = {"cache_dir": "results/cache", "tables": {"formats": ["csv"]}, "models": models}
    fetched = tmp_path / "fetched"
    download = {"into": "release"}
    env = {"HF_ENDPOINT": hub.url}
    # The download runs under a configuration whose data root exists (here the demo's).
    write_config(fetched, {**base, "data_root": str(DEMO), "download": download})
    run_snakemake(fetched, "download", "--config", f"revision={hub.commit}", env=env)
    assert read_record(fetched / "release")["commit"] == hub.commit
    # No revision in the evaluating configuration: the folder's record pins it.
    write_config(fetched, {**base, "data_root": "release", "download": download})
    # The metrics (and the stamp upstream of them): what the assertions below read.
    run = run_snakemake(fetched, "results/metrics/metrics.parquet", env=env)
    assert "start download" not in run.stdout + run.stderr  # verified already: not fetched again
    ours = pd.read_parquet(fetched / "results/metrics/metrics.parquet")
    demo = pd.read_parquet(demo_workflow / "results/metrics/metrics.parquet")
    theirs = demo[demo["model"].isin([m["name"] for m in models])].reset_index(drop=True)
    pd.testing.assert_frame_equal(ours, theirs)
    assert len(ours) > 0
    stamp = json.loads((fetched / "results/stamp.json").read_text())
    assert stamp["release"]["commit"] == hub.commit and stamp["release"]["repo"] == REPO_ID
    assert json.loads((demo_workflow / "results/stamp.json").read_text())["release"] is None
    shutil.rmtree(fetched / "release")
