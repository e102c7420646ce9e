"""Result stamps: fields, per-model digests that change exactly when that model's settings do."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from dualcog.config import validate_config
from dualcog.schemas import METRICS, write_table
from dualcog.stamp import (
    METADATA_KEY,
    build_stamp,
    data_stamp,
    git_state,
    model_entry,
    parquet_stamp,
    stamp_digest,
    stamp_for_models,
    stamp_metadata,
    stamp_summary,
    write_stamp,
)
from dualcog.tables import Table, to_html, to_latex, to_markdown
from dualcog.tables import write_table as write_result_table
from dualcog.versions import PARSER_VERSION, PROTOCOL_REVISION, SCORER_VERSION

NOW = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
MODELS = [
    {"name": "a", "backend": "simulated", "seed": 1, "skill": 0.5},
    {"name": "b", "backend": "simulated", "seed": 2, "skill": 0.7},
    {"name": "c", "backend": "replay", "replay": ["runs/c.jsonl"]},
]


@pytest.fixture()
def data_root(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    manifest = root / "scene" / "image_tasks" / "manifests" / "scene.latest_manifest.json"
    manifest.parent.mkdir(parents=True)
    manifest.write_text('{"samples": []}')
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "c.jsonl").write_text('{"sample_id": "x", "raw_text": "{}"}\n')
    return root


def _stamp(models: list[dict], data_root: Path) -> dict:
    config = validate_config({"data_root": str(data_root), "models": models})
    entries = {m["name"]: model_entry(m) for m in config["models"]}
    manifests = sorted(data_root.glob("**/*.json"))
    return build_stamp(entries, manifests, data_root, now=NOW, base=data_root.parent)


def test_a_stamp_from_the_runs_data_stamp_is_the_same_stamp(data_root: Path) -> None:
    """The explorer pages take the manifests' digests from results/data_stamp.json (made once
    per run): the stamp equals one that hashes the manifests itself, and follows a change."""
    config = validate_config({"data_root": str(data_root), "models": MODELS})
    entries = {m["name"]: model_entry(m) for m in config["models"]}
    manifests = sorted(data_root.glob("**/*.json"))
    data = json.loads(json.dumps(data_stamp(manifests, data_root)))  # as the file holds it
    given = build_stamp(entries, [], data_root, now=NOW, base=data_root.parent, data=data)
    assert given == _stamp(MODELS, data_root)
    assert list(given["data"]["manifests"]) == [
        "scene/image_tasks/manifests/scene.latest_manifest.json"
    ]
    manifests[0].write_text('{"samples": [1]}')
    assert data_stamp(manifests, data_root)["digest"] != data["digest"]


def _digests(stamp: dict) -> dict[str, str]:
    return {name: entry["digest"] for name, entry in stamp["models"].items()}


def test_stamp_fields(data_root: Path) -> None:
    stamp = _stamp(MODELS, data_root)
    assert stamp["protocol_revision"] == PROTOCOL_REVISION == "2.3"
    assert stamp["stage_versions"]["parser"] == PARSER_VERSION
    assert stamp["stage_versions"]["scorer"] == SCORER_VERSION
    assert stamp["version"] == "0.1.0"
    assert stamp["created"] == "2026-01-02T03:04:05Z"
    assert list(stamp["data"]["manifests"]) == [
        "scene/image_tasks/manifests/scene.latest_manifest.json"
    ]
    assert set(stamp["models"]) == {"a", "b", "c"}
    assert list(stamp["models"]["c"]["inputs"]) == ["runs/c.jsonl"]
    summary = stamp_summary(stamp)
    assert "protocol revision 2.3" in summary and PARSER_VERSION in summary


def test_changing_one_models_setting_changes_only_its_digest(data_root: Path) -> None:
    before = _digests(_stamp(MODELS, data_root))
    hotter = [dict(m) for m in MODELS]
    hotter[1]["temperature"] = 0.7
    after = _digests(_stamp(hotter, data_root))
    assert after["b"] != before["b"]
    assert after == {**before, "b": after["b"]}  # a and c unchanged
    rescaled = [dict(m) for m in MODELS]
    rescaled[0]["bbox_scale"] = "per_mille"  # changes its scores, not its answers
    after = _digests(_stamp(rescaled, data_root))
    assert after["a"] != before["a"]
    assert after == {**before, "a": after["a"]}


def test_throughput_settings_and_keys_do_not_change_digests(data_root: Path) -> None:
    before = _digests(_stamp(MODELS, data_root))
    tuned = [dict(m) for m in MODELS]
    tuned[0].update(rpm_limit=60, concurrency=4, display_name="A", group="proprietary")
    assert _digests(_stamp(tuned, data_root)) == before


def test_replayed_file_and_manifest_bytes_change_the_stamp(data_root: Path) -> None:
    before = _stamp(MODELS, data_root)
    (data_root.parent / "runs" / "c.jsonl").write_text('{"sample_id": "x", "raw_text": "[]"}\n')
    after = _stamp(MODELS, data_root)
    assert _digests(after)["c"] != _digests(before)["c"]
    assert _digests(after)["a"] == _digests(before)["a"]
    manifest = next(data_root.glob("**/*.json"))
    manifest.write_text('{"samples": [1]}')
    assert _stamp(MODELS, data_root)["data"]["digest"] != before["data"]["digest"]


def test_git_state_outside_a_checkout_is_none(tmp_path: Path, data_root: Path) -> None:
    assert git_state(tmp_path) is None
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "9.9"\n')
    config = validate_config({"data_root": str(data_root), "models": MODELS[:1]})
    entries = {m["name"]: model_entry(m) for m in config["models"]}
    stamp = build_stamp(entries, [], data_root, now=NOW, root=tmp_path)
    assert stamp["git"] is None and stamp["version"] == "9.9"
    assert "no git checkout" in stamp_summary(stamp)


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_git_state_in_a_checkout(tmp_path: Path) -> None:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(tmp_path), *args], capture_output=True, text=True, check=True
        ).stdout.strip()

    git("init", "-q")
    (tmp_path / "f.txt").write_text("one")
    git("add", "f.txt")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    state = git_state(tmp_path)
    assert state == {"commit": git("rev-parse", "HEAD"), "dirty": False}
    (tmp_path / "f.txt").write_text("two")
    assert git_state(tmp_path)["dirty"] is True


def test_stamp_for_models_keeps_only_those_models(data_root: Path) -> None:
    stamp = _stamp(MODELS, data_root)
    assert set(stamp_for_models(stamp, ["b"])["models"]) == {"b"}


def test_metrics_parquet_carries_the_stamp(tmp_path: Path, data_root: Path) -> None:
    stamp = _stamp(MODELS, data_root)
    write_stamp(stamp, tmp_path / "stamp.json")
    metadata = stamp_metadata(tmp_path / "stamp.json")
    assert METADATA_KEY in metadata
    frame = pd.DataFrame(
        [{"model": "a", "task": "t", "parse": "compatible", "stratum": "all", "metric": "m",
          "value": 0.5, "n": 2}]
    )  # fmt: skip
    write_table(frame, METRICS, tmp_path / "metrics.parquet", metadata)
    assert parquet_stamp(tmp_path / "metrics.parquet") == stamp
    assert pd.read_parquet(tmp_path / "metrics.parquet")["value"].tolist() == [0.5]


def _table() -> Table:
    frame = pd.DataFrame({"Group": ["baseline"], "Model": ["a"], "X": [0.5]}, index=["a"])
    from dualcog.tables import Column

    return Table("t", "Title", frame, [Column("", "X", "t", "m")], text_columns=["Group", "Model"])


def test_every_table_format_carries_the_stamp(tmp_path: Path, data_root: Path) -> None:
    stamp = _stamp(MODELS, data_root)
    commit = stamp["git"]["commit"] if stamp["git"] else None
    digest = stamp_digest(stamp)
    markdown = to_markdown(_table(), stamp)
    assert "<!-- dualcog stamp" in markdown and markdown.count(digest) == 1
    assert "full stamp: results/stamp.json" in markdown
    assert stamp["data"]["digest"] in markdown and (commit is None or commit[:12] in markdown)
    latex = to_latex(_table(), stamp)
    block = latex[latex.index("% --- stamp ---") : latex.index("% --- end stamp ---")]
    assert stamp["data"]["digest"] in block and digest in block
    assert all(line.startswith("%") for line in block.splitlines())  # comments, never text
    html_text = to_html(_table(), stamp)
    assert 'class="stamp"' in html_text and stamp["data"]["digest"] in html_text
    assert (
        '<th scope="row">Stamp digest</th>' in html_text
        and "{" not in html_text.split('class="stamp"')[1]
    )  # a table of plain values, not JSON
    written = write_result_table(_table(), tmp_path, ["csv", "md"], stamp)
    sidecar = tmp_path / "t.stamp.json"
    assert sidecar in written
    assert json.loads(sidecar.read_text()) == stamp
    assert stamp["data"]["digest"] not in (tmp_path / "t.csv").read_text()  # CSV stays plain
    # Without a stamp the writers are unchanged.
    assert "dualcog stamp" not in to_markdown(_table()) and "% --- stamp" not in to_latex(_table())


def test_table_stamp_line_stays_short_with_many_models(data_root: Path) -> None:
    """45 models' entries stay in results/stamp.json; the tables carry a line of fixed size."""
    many = [{**MODELS[1], "name": f"model-{i}", "seed": i} for i in range(200)]
    stamp = _stamp(many, data_root)
    latex = to_latex(_table(), stamp)
    assert max(len(line) for line in latex.splitlines()) < 400
    assert stamp_digest(stamp) in latex and stamp_digest(stamp) != stamp_digest(
        _stamp(MODELS, data_root)
    )
