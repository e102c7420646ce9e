"""The request contract of PROTOCOL §11: every demo sample, posted for every row of the controls
table of UPSTREAM_FORMAT §5, equals the body the authors' runs sent (built here from the spec,
independently of dualcog.inference.request), except the documented `max_tokens: 2048` and the
§11.3 effort; the record of each request names the bytes that arrived (a loopback server keeps
them raw)."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest
from frames import arrow
from loopback_server import LoopbackServer, completion

from dualcog.config import validate_config
from dualcog.errors import ConfigError
from dualcog.inference import media_path, run_model
from dualcog.switches import split_mode
from dualcog.tasks import VIDEO_TASKS

THINK_PREFIX = "You are a careful thinker. Reason inside <think></think> first. "
SEPARATOR = "\n\nThen follow the task-specific instruction below.\n\n"
PREFILL = "<think>\n</think>"
INTERNVL_INSTANT = {"continue_final_message": True, "add_generation_prompt": False}
QWEN_OFF = {"chat_template_kwargs": {"enable_thinking": False}}
OFF, ON = {"reasoning": {"enabled": False}}, {"reasoning": {"enabled": True}}
DISABLED = {"thinking": {"type": "disabled"}}

# One case per row of the controls table (a row naming several families: one per family).
# (row, run name, route key when the authors' spelling cannot be a run name, settings,
#  the controls sent, whether an assistant prefill follows, whether the system text is prefixed)
ROWS = [
    ("instant/qwen3.5-plus", "Qwen3.5-Plus-Instant", None, {}, {"enable_thinking": False}),
    ("instant/qwen3.6-plus", "Qwen3.6-Plus-Instant", None, {}, {"enable_thinking": False}),
    ("instant/qwen3.5-flash", "Qwen3.5-Flash-Instant", None, {}, {"enable_thinking": False}),
    ("instant/kimi-k2.5", "Kimi-K2.5-Instant", None, {}, {"enable_thinking": False}),
    ("instant/family-qwen", "Qwen3.5-27B-Instant", None, {}, QWEN_OFF),
    ("instant/family-qwen-pro", "Pro-Qwen3.5-Instant", "Pro/Qwen/Qwen3.5-397B-A17B", {}, QWEN_OFF),
    ("instant/family-qwen-spacer", "SpaceR-Instant", None, {}, QWEN_OFF),
    ("instant/family-qwen-vilasr", "ViLaSR-Instant", None, {}, QWEN_OFF),
    ("instant/internvl", "InternVL3_5-4B-Instant", None, {}, INTERNVL_INSTANT, True),
    ("instant/interns1", "Intern-S1-Pro-Instant", None, {}, {"thinking_mode": False}),
    ("instant/glm", "GLM-4.6V-Instant", None, {}, DISABLED),
    ("instant/glm-z-ai", "Z-AI-GLM-Instant", "z-ai/glm-4.5v", {}, DISABLED),
    ("instant/mimo-v2-omni", "MiMo-V2-Omni-Instant", None, {}, DISABLED),
    ("instant/claude", "Claude-Sonnet-4.6-Instant", None, {}, OFF),
    ("instant/xai", "Grok-4.1-Fast-Instant", None, {}, OFF),
    ("instant/xai-prefix", "XAI-Instant", "x-ai/some-model", {}, OFF),
    ("instant/gemini", "Gemini-3-Flash-Instant", None, {}, OFF),
    ("instant/google", "Gemma-Instant", "google/gemma-3-27b-it", {}, OFF),
    ("instant/kimi", "Kimi-K2.6-OR-Instant", "moonshotai/kimi-k2.6", {}, OFF),
    ("instant/xiaomi", "MiMo-V2.5-OR-Instant", "xiaomi/mimo-v2.5", {}, OFF),
    (
        "thinking/internvl",
        "InternVL3_5-4B-Thinking",
        None,
        {"thinking_system_prefix": THINK_PREFIX},
        {},
        False,
        True,
    ),
    (
        "thinking/qwen3.5-plus",
        "Qwen3.5-Plus-Thinking",
        None,
        {},
        {"enable_thinking": True, "thinking_budget": 4000},
    ),
    (
        "thinking/qwen3.5-flash",
        "Qwen3.5-Flash-Thinking",
        None,
        {},
        {"enable_thinking": True, "thinking_budget": 4000},
    ),
    ("thinking/kimi-k2.5", "Kimi-K2.5-Thinking", None, {}, {"enable_thinking": True}),
    ("thinking/mimo-v2-omni", "MiMo-V2-Omni-Thinking", None, {}, {}),
    ("thinking/claude", "Claude-Sonnet-4.6-Thinking", None, {}, ON),
    ("thinking/xai", "Grok-4.1-Fast-Thinking", None, {}, ON),
    ("thinking/gemini", "Gemini-3-Flash-Thinking", None, {}, ON),
    ("thinking/google", "Gemma-Thinking", "google/gemma-3-27b-it", {}, ON),
    ("thinking/kimi", "Kimi-K2.6-OR-Thinking", "moonshotai/kimi-k2.6", {}, ON),
    ("thinking/xiaomi", "MiMo-V2.5-OR-Thinking", "xiaomi/mimo-v2.5", {}, ON),
    ("thinking/qwen", "Qwen3.5-9B-Thinking", None, {}, {}),
    ("thinking/interns1", "Intern-S1-Pro-Thinking", None, {}, {}),
    ("thinking/glm", "GLM-4.6V-Thinking", None, {}, {}),
    (
        "reasoning-is-thinking",
        "Qwen3.5-Plus-Reasoning",
        None,
        {},
        {"enable_thinking": True, "thinking_budget": 4000},
    ),  # noqa: E501
    ("no-suffix", "Qwen3.5-9B", None, {}, {}),
]


def case(row: tuple) -> dict:
    label, name, route, settings, controls, *forms = row
    prefill, prefixed = (list(forms) + [False, False])[:2]
    return {
        "label": label,
        "name": name,
        "route": route or split_mode(name)[0],
        "settings": settings,
        "controls": controls,
        "prefill": prefill,
        "prefixed": prefixed,
    }


CASES = [case(row) for row in ROWS]


def config_of(api_base: str, *models: dict) -> dict:
    """A configuration whose inline routes send every model to the loopback server."""
    routes = {}
    entries = []
    for model in models:
        key = model.pop("route_key")
        routes[key] = {"api_base": api_base, "api_key": "EMPTY", "request_model": f"m/{key}"}
        entries.append({"backend": "openai", **model, **({"route": key} if "/" in key else {})})
    return {"data_root": "d", "routes": routes, "models": entries}


def resolved(api_base: str, name: str, route_key: str, **settings: object) -> dict:
    model = {"name": name, "route_key": route_key, "max_retries": 0, **settings}
    return validate_config(config_of(api_base, model))["models"][0]


def data_uri(store: Path, key: str, kind: str) -> str:
    mime = "video/mp4" if kind == "video" else "image/jpeg"
    data = media_path(store, key, kind).read_bytes()
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def authors_body(prompt: dict, store: Path, model: str, spec: dict) -> dict:
    """The body of UPSTREAM_FORMAT §4-5 for one prompt and one row (without max_tokens)."""
    content = [{"type": "text", "text": prompt["user_text"]}]
    for key, kind in zip(prompt["media_keys"], prompt["media_kinds"], strict=True):
        block = "video_url" if kind == "video" else "image_url"
        content.append({"type": block, block: {"url": data_uri(store, key, kind)}})
    system = prompt["system_text"]
    if system is not None and prompt["task"] in VIDEO_TASKS:
        system = system.strip()
    messages = []
    if spec["prefixed"]:
        text = (THINK_PREFIX + SEPARATOR + (system or "")).strip()
        messages.append({"role": "system", "content": [{"type": "text", "text": text}]})
    elif system is not None:
        messages.append({"role": "system", "content": system})
    messages.append({"role": "user", "content": content})
    if spec["prefill"]:
        messages.append({"role": "assistant", "content": PREFILL})
    return {"model": model, "messages": messages, "temperature": 0.2, **spec["controls"]}


@pytest.fixture(scope="module")
def demo_store(demo_workflow: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's media prepared as the workflow prepares them for a model that sends media
    (the shared demo run has none, so its store holds no files)."""
    from dualcog.media.problems import video_frame_counts
    from dualcog.media.store import ImageSettings, prepare_images, prepare_videos
    from dualcog.prompts.render import image_sources, video_sources
    from dualcog.schemas import read_arrow

    samples = read_arrow(demo_workflow / "results" / "benchmark" / "samples.parquet").to_pandas()
    store = tmp_path_factory.mktemp("contract_media")
    settings = ImageSettings(640, 480, 80)
    prepare_images(image_sources(samples), store, settings)
    prepare_videos(video_sources(samples), store, None, settings, video_frame_counts(samples))
    return store


@pytest.fixture(scope="module")
def demo_prompts(demo_workflow: Path) -> pd.DataFrame:
    """Every demo sample's prompt (video_url mode); video system texts end in a newline, as
    the authors' generator stores them."""
    frames = [
        pd.read_parquet(path)
        for path in sorted((demo_workflow / "results" / "prompts").glob("*.parquet"))
        if ".frames" not in path.name  # video_url mode, not the frames-mode variants
    ]
    prompts = pd.concat(frames, ignore_index=True)
    video = prompts.task.isin(VIDEO_TASKS)
    prompts.loc[video, "system_text"] = prompts.loc[video, "system_text"] + "\n"
    return prompts


def records(frame: pd.DataFrame) -> list[dict]:
    out = frame.to_dict("records")
    for row in out:
        row["media_keys"] = [str(k) for k in row["media_keys"]]
        row["media_kinds"] = [str(k) for k in row["media_kinds"]]
        row["system_text"] = None if pd.isna(row["system_text"]) else row["system_text"]
    return out


def answer(body: dict, count: int) -> tuple:
    return 200, completion('{"answer_option_id":"A"}'), {}


def post_all(model: dict, prompts: pd.DataFrame, store: Path, cache: Path) -> pd.DataFrame:
    out = run_model(model, arrow(prompts), None, store, cache).to_pandas()
    assert list(out.status) == ["ok"] * len(prompts), out.error_message.tolist()
    return out


def by_sample(server: LoopbackServer) -> dict[str, tuple[dict, bytes]]:
    """sample id -> (parsed body, raw bytes), the echo server naming each by its text."""
    received = {}
    for body, raw in zip(server.bodies, server.raw_bodies, strict=True):
        user = next(m for m in body["messages"] if m["role"] == "user")
        received[user["content"][0]["text"]] = (body, raw)
    return received


def marked(prompts: pd.DataFrame) -> pd.DataFrame:
    """Prompts whose user text ends with their sample id, so each body names its sample."""
    marked = prompts.copy()
    marked["user_text"] = marked.user_text + "\n#" + marked.sample_id
    return marked


@pytest.mark.workflow
@pytest.mark.parametrize("spec", CASES, ids=[c["label"] for c in CASES])
def test_every_demo_sample_posts_the_authors_body(spec, demo_prompts, demo_store, tmp_path) -> None:
    prompts = marked(demo_prompts)
    with LoopbackServer(answer) as server:
        model = resolved(server.api_base, spec["name"], spec["route"], **spec["settings"])
        out = post_all(model, prompts, demo_store, tmp_path / "cache")
        received = by_sample(server)
    assert len(received) == len(prompts) > 90
    recorded = dict(zip(out.sample_id, out.request_sha256, strict=True))
    for prompt in records(prompts):
        body, raw = received[prompt["user_text"]]
        assert body.pop("max_tokens") == 2048  # PROTOCOL §11.1 (the authors send none)
        expected = authors_body(prompt, demo_store, f"m/{spec['route']}", spec)
        assert body == expected, prompt["sample_id"]
        # The record names the very bytes that arrived.
        assert recorded[prompt["sample_id"]] == hashlib.sha256(raw).hexdigest()
    first = out.iloc[0]
    assert first.request_temperature == 0.2 and first.request_max_tokens == 2048
    switch = json.loads(first.request_switch)
    assert switch["body"] == spec["controls"] and switch["system_prefix"] == spec["prefixed"]
    prefill = out.request_prefill.iloc[0]
    assert (None if pd.isna(prefill) else prefill) == (PREFILL if spec["prefill"] else None)
    assert out.request_reencoded.isna().all()  # demo videos are under the size limit


# -- names the rules do not recognise, effort, Thinking-High, parameters --------------------

UNRECOGNISED = [
    # run name, configured family and settings, controls sent
    ("GPT-5.4-Instant", {"family": "openrouter"}, OFF),
    ("GPT-5.4-Thinking", {"family": "openrouter"}, ON),
    ("Kimi-K2.6-Instant", {"family": "dashscope"}, {"enable_thinking": False}),
    (
        "Kimi-K2.6-Thinking",
        {"family": "dashscope", "thinking_budget": None},
        {"enable_thinking": True},
    ),  # noqa: E501
    ("GLM-4.5V-Instant", {"family": "glm"}, DISABLED),
    ("MiMo-V2.5-Instant", {"family": "glm"}, DISABLED),
    (
        "Muse-Spark-1.3-Contributor-Reasoning",
        {"family": "openrouter", "reasoning_only": True, "reasoning_effort": "minimal"},
        {"reasoning": {"enabled": True, "effort": "minimal"}},
    ),  # noqa: E501
    (
        "Claude-Opus-4.6-Thinking",
        {"reasoning_only": True},
        {"reasoning": {"enabled": True, "effort": "low"}},
    ),  # noqa: E501
    (
        "Gemini-3.1-Pro-Preview-Thinking",
        {"reasoning_only": True},
        {"reasoning": {"enabled": True, "effort": "low"}},
    ),  # noqa: E501
    (
        "Claude-Opus-4.6-Thinking-High",
        {"reasoning_only": True},
        {"reasoning": {"enabled": True, "effort": "high"}},
    ),  # noqa: E501
    (
        "GPT-5.5-Thinking-High",
        {"family": "openrouter"},
        {"reasoning": {"enabled": True, "effort": "high"}},
    ),  # noqa: E501
    (
        "claude-opus-4-5-20251101-fastai-Thinking-High",
        {},
        {"reasoning": {"enabled": True, "effort": "high"}},
    ),  # noqa: E501
    ("Qwen3.5-9B-Instant", {"family": "glm", "override_family": True}, DISABLED),
]


@pytest.mark.parametrize(("name", "settings", "controls"), UNRECOGNISED)
def test_configured_families_effort_and_thinking_high(name, settings, controls, tmp_path) -> None:
    prompts = pd.DataFrame([{
        "sample_id": "s", "task": "landmark_position", "request_key": "rk", "system_text": "S",
        "user_text": "U", "media_keys": [], "media_kinds": [], "offered_option_ids": ["A"],
    }])  # fmt: skip
    with LoopbackServer(answer) as server:
        model = resolved(server.api_base, name, split_mode(name)[0], **settings)
        out = post_all(model, prompts, tmp_path, tmp_path / "cache")
        (body,) = server.bodies
    route = split_mode(name)[0]
    expected = {
        "model": f"m/{route}",
        "messages": [{"role": "system", "content": "S"},
                     {"role": "user", "content": [{"type": "text", "text": "U"}]}],
        "temperature": 0.2,
        "max_tokens": 2048,
        **controls,
    }  # fmt: skip
    assert body == expected
    assert out.request_sha256[0] == hashlib.sha256(server.raw_bodies[0]).hexdigest()
    assert json.loads(out.request_switch[0])["body"] == controls


def test_the_stamp_digests_the_set_of_request_records(tmp_path) -> None:
    from dualcog.schemas import RESPONSES, write_table
    from dualcog.stamp import request_set_digest

    rows = {"sample_id": ["b", "a", "c"], "task": ["behavior"] * 3,
            "request_sha256": ["2" * 64, "1" * 64, None]}  # fmt: skip
    path = tmp_path / "behavior.parquet"
    write_table(pd.DataFrame(rows), RESPONSES, path)  # the other columns null
    lines = f"behavior\ta\t{'1' * 64}\nbehavior\tb\t{'2' * 64}\n"  # sorted; no record: left out
    expected = hashlib.sha256(lines.encode()).hexdigest()[:16]
    assert request_set_digest([path]) == {"requests": 2, "digest": expected}


def test_contradictions_and_impossible_switches_are_refused_at_validation() -> None:
    base = "http://127.0.0.1:9/v1"
    with pytest.raises(ConfigError) as info:
        resolved(base, "Qwen3.5-27B-Instant", "Qwen3.5-27B", family="dashscope")
    message = str(info.value)
    assert message.startswith("invalid configuration in config: model Qwen3.5-27B-Instant: family:")
    assert "family qwen" in message and "override_family" in message
    # An equivalent spelling is no contradiction; an older spelling neither.
    assert (
        resolved(base, "Claude-Sonnet-4.6-Instant", "Claude-Sonnet-4.6", family="openrouter")[
            "family"
        ]
        == "claude"
    )  # noqa: E501
    assert (
        resolved(base, "Qwen3.5-9B-Instant", "Qwen3.5-9B", family="qwen_vllm")["family"] == "qwen"
    )  # noqa: E501
    with pytest.raises(ConfigError, match=r"model Qwen3.5-9B-Thinking-High: -Thinking-High"):
        resolved(base, "Qwen3.5-9B-Thinking-High", "Qwen3.5-9B")
    with pytest.raises(ConfigError, match=r"model GPT-5.4-Instant: its -Instant suffix needs"):
        resolved(base, "GPT-5.4-Instant", "GPT-5.4")
    with pytest.raises(ConfigError, match=r"override_family: true needs a `family:`"):
        resolved(base, "Qwen3.5-9B-Instant", "Qwen3.5-9B", override_family=True)


def test_configured_temperature_and_no_max_tokens_are_sent_and_recorded(tmp_path) -> None:
    prompts = pd.DataFrame([{
        "sample_id": "v1", "task": "behavior", "request_key": "rk1",
        "system_text": "  video system\n", "user_text": "U", "media_keys": [], "media_kinds": [],
        "offered_option_ids": ["A"],
    }])  # fmt: skip
    with LoopbackServer(answer) as server:
        model = resolved(
            server.api_base, "Qwen3.5-9B-Instant", "Qwen3.5-9B", temperature=0, max_tokens=None
        )  # noqa: E501
        out = post_all(model, prompts, tmp_path, tmp_path / "cache")
        (body,) = server.bodies
    assert body["temperature"] == 0 and "max_tokens" not in body
    assert body["messages"][0] == {"role": "system", "content": "video system"}
    assert out.request_temperature[0] == 0.0 and pd.isna(out.request_max_tokens[0])
    assert out.request_sha256[0] == hashlib.sha256(server.raw_bodies[0]).hexdigest()


FAMILY_RULES = [
    # (base name, family): each of the twelve rules, their order, and names none matches
    ("Intern-S1-Pro", "interns1"),
    ("intern-s1-mini-internvl", "interns1"),  # rule 1 before rule 2
    ("OpenGVLab/InternVL3_5-4B", "internvl"),
    ("Pro/moonshotai/Kimi-K2.5", "qwen"),  # rule 3 before rule 10
    ("pro_anything", "qwen"),
    ("VST-7B-RL", "qwen"),
    ("VST-7B-SFT", "qwen"),
    ("SpaceThinker-Qwen2.5VL", "qwen"),
    ("SpaceOm", "qwen"),
    ("SpaceR", "qwen"),
    ("LIVASR-7B", "qwen"),
    ("ViLaSR-3B", "qwen"),
    ("Qwen/Qwen3.5-397B-A17B", "qwen"),
    ("anthropic/claude-opus-4.6", "claude"),
    ("x-ai/grok-4.1-fast", "xai"),
    ("Grok-4", "xai"),
    ("x-aimodel", "xai"),
    ("google/gemini-3-flash-preview", "gemini"),  # rule 8 before rule 9
    ("google/gemma-3-27b-it", "google"),
    ("google_gemma", "google"),
    ("Googlebot-VL", "google"),
    ("Kimi-K2.5", "kimi"),
    ("moonshotai/kimi-k2.6", "kimi"),
    ("GLM-4.6V", "glm"),
    ("z-ai/glm-4.5v", "glm"),
    ("MiMo-V2-Omni", "xiaomi"),
    ("xiaomi/mimo-v2.5", "xiaomi"),
    ("Kimi-K2.6", None),
    ("MiMo-V2.5", None),
    ("GLM-4.5V", None),
    ("GLM-5.3-Flash", None),
    ("GPT-5.5", None),
    ("Muse-Spark-1.3-Contributor", None),
    ("mimo-v2-pro", None),
]


@pytest.mark.parametrize(("base", "family"), FAMILY_RULES)
def test_the_twelve_family_rules(base, family) -> None:
    from dualcog.switches import authors_family

    assert authors_family(base) == family


@pytest.mark.parametrize(
    ("run", "base", "suffix"),
    [
        ("Qwen3.5-9B-Instant", "Qwen3.5-9B", "Instant"),
        ("GPT-5.5-Thinking-High", "GPT-5.5", "Thinking-High"),
        ("Claude-Opus-4.8-Thinking", "Claude-Opus-4.8", "Thinking"),
        ("Qwen3.5-Plus-Reasoning", "Qwen3.5-Plus", "Reasoning"),
        ("GPT-5.3", "GPT-5.3", None),
        ("Model-High", "Model-High", None),
        ("X-Instant-High", "X-Instant-High", None),
        ("A-Thinking-Thinking", "A-Thinking", "Thinking"),
    ],
)
def test_run_name_suffixes(run, base, suffix) -> None:
    assert split_mode(run) == (base, suffix)
