"""Routes: the authors' common_api_runtime.yaml read as it is, and the request bodies its runs
send (checked at a real HTTP server on loopback), family by family."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
import yaml
from frames import arrow
from loopback_server import LoopbackServer, Reply, completion

from dualcog import schemas
from dualcog.config import validate_config
from dualcog.errors import ConfigError
from dualcog.inference import media_path, run_model
from dualcog.preflight import check
from dualcog.routes import read_routes_file

FIXTURE = Path(__file__).parents[1] / "data" / "common_api_runtime.yaml"
CLOUD_KEY = "sk-fixture-cloud-Hq7Vt3Xw9Pz2"
BAILIAN_KEY = "sk-fixture-bailian-Lm5K8Qx1"
OPENROUTER_KEY = "sk-or-fixture-Zq8Xv2Lp9Rt4"
THINK_PREFIX = "Think inside <think></think> first. "
IMAGE = "ab" + "3" * 62


def fixed_reply(body: dict, count: int) -> Reply:
    return 200, completion('{"answer_option_id":"A","bbox_xyxy_norm":[0.1,0.1,0.5,0.5]}'), {}


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackServer]:
    with LoopbackServer(fixed_reply) as running:
        for name in ("LOCAL", "BAILIAN", "CLOUD", "OPENROUTER"):
            monkeypatch.setenv(f"FIXTURE_{name}_BASE", running.api_base)
        monkeypatch.setenv("FIXTURE_BAILIAN_KEY", BAILIAN_KEY)
        monkeypatch.setenv("FIXTURE_CLOUD_KEY", CLOUD_KEY)
        monkeypatch.setenv("FIXTURE_OPENROUTER_KEY", OPENROUTER_KEY)
        monkeypatch.setenv("FIXTURE_GLM_RPM", "120")
        yield running


def paper_like(*models: dict, **top: object) -> dict:
    return {"data_root": "d", "routes_file": str(FIXTURE), "models": list(models), **top}


def resolved(name: str, **settings: object) -> dict:
    config = validate_config(paper_like({"name": name, "backend": "openai", **settings}))
    return config["models"][0]


def prompts(tmp_path: Path, marker: str) -> tuple[pd.DataFrame, Path]:
    store = tmp_path / "media"
    path = media_path(store, IMAGE, "image")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\xff\xd8\xff\xe0jpeg")
    row = {
        "sample_id": "s1",
        "task": "landmark_position",
        "request_key": f"rk-{marker}",
        "system_text": "You are a UAV.",
        "user_text": marker,
        "media_keys": [IMAGE],
        "media_kinds": ["image"],
        "offered_option_ids": ["A", "B"],
    }
    frame = schemas.to_table(pd.DataFrame([row]), schemas.PROMPTS).to_pandas()
    return frame, store


def sent_body(server: LoopbackServer, tmp_path: Path, model: dict) -> tuple[dict, dict]:
    """The body and headers the server received for one request of `model`."""
    frame, store = prompts(tmp_path, model["name"])
    out = run_model(
        {**model, "max_retries": 0}, arrow(frame), None, store, tmp_path / "cache"
    ).to_pandas()
    assert list(out.status) == ["ok"], out.error_message.tolist()
    user = [
        next(m for m in body["messages"] if m["role"] == "user")["content"][0]["text"]
        for body in server.bodies
    ]
    index = user.index(model["name"])
    return server.bodies[index], server.headers[index]


def test_fixture_loads_as_it_is() -> None:
    routes = read_routes_file(FIXTURE)
    assert routes["Qwen3.6-Plus"] == {
        "api_source": "cloud",
        "api_base": "${FIXTURE_BAILIAN_BASE}",  # from base_url
        "api_key": "${FIXTURE_BAILIAN_KEY}",  # from key
        "request_model": "qwen3.6-plus",
        "rpm_limit": 60,
        "tpm_limit": 1000000,
        "rate_limit_reserve_ratio": 0.1,
        "estimated_tokens_per_request": 4000,
        "channel": "api",
    }
    assert routes["Qwen3.5-9B"]["channel"] == "local"
    assert "notes" not in routes["Intern-S1-Pro"]  # their other keys are not read


SWITCHES = [
    # run name, its family by the authors' rules, the model's settings, what the body must hold,
    # what it must not (tests/inference/test_request_contract.py checks whole bodies, row by row)
    ("Qwen3.5-9B-Instant", "qwen", {}, {"chat_template_kwargs": {"enable_thinking": False}}, []),
    ("Qwen3.5-9B-Thinking", "qwen", {}, {}, ["chat_template_kwargs", "enable_thinking"]),
    ("Qwen3.6-Plus-Instant", "qwen", {}, {"enable_thinking": False}, ["thinking_budget"]),
    (
        "Qwen3.6-Plus-Thinking",
        "qwen",
        {},
        {"enable_thinking": True, "thinking_budget": 4000},
        [],
    ),
    ("Kimi-K2.5-Instant", "kimi", {}, {"enable_thinking": False}, []),
    ("Kimi-K2.5-Thinking", "kimi", {}, {"enable_thinking": True}, ["thinking_budget"]),
    (
        "InternVL-3.5-8B-Instant",
        "internvl",
        {},
        {"continue_final_message": True, "add_generation_prompt": False},
        [],
    ),
    (
        "InternVL-3.5-8B-Thinking",
        "internvl",
        {"thinking_system_prefix": THINK_PREFIX},
        {},
        ["continue_final_message"],
    ),
    ("Intern-S1-Pro-Instant", "interns1", {}, {"thinking_mode": False}, []),
    ("Intern-S1-Pro-Thinking", "interns1", {}, {}, ["thinking_mode"]),
    ("GLM-4.6V-Instant", "glm", {}, {"thinking": {"type": "disabled"}}, []),
    ("GLM-4.6V-Thinking", "glm", {}, {}, ["thinking"]),
    ("MiMo-V2-Omni-Instant", "xiaomi", {}, {"thinking": {"type": "disabled"}}, ["reasoning"]),
    ("MiMo-V2-Omni-Thinking", "xiaomi", {}, {}, ["thinking", "reasoning"]),
    ("Claude-Sonnet-4.6-Instant", "claude", {}, {"reasoning": {"enabled": False}}, []),
    ("Claude-Sonnet-4.6-Thinking", "claude", {}, {"reasoning": {"enabled": True}}, []),
    (
        "Muse-Spark-1.3-Contributor-Reasoning",
        "openrouter",  # no rule recognises it: the configured family
        {"family": "openrouter", "reasoning_only": True, "reasoning_effort": "minimal"},
        {"reasoning": {"enabled": True, "effort": "minimal"}},
        [],
    ),
]


@pytest.mark.parametrize(("name", "family", "settings", "holds", "lacks"), SWITCHES)
def test_request_body_of_each_family_and_mode(
    server, tmp_path, name, family, settings, holds, lacks
):
    model = resolved(name, **settings)
    assert model["family"] == family
    body, headers = sent_body(server, tmp_path, model)
    routes = read_routes_file(FIXTURE)
    route = routes[name.rsplit("-", 1)[0]]
    assert body["model"] == route["request_model"]
    assert body["temperature"] == 0.2 and body["max_tokens"] == 2048
    for key, value in holds.items():
        assert body[key] == value, key
    for key in lacks:
        assert key not in body, key
    messages = body["messages"]
    if name == "InternVL-3.5-8B-Instant":
        assert messages[-1] == {"role": "assistant", "content": "<think>\n</think>"}
    elif name == "InternVL-3.5-8B-Thinking":
        text = THINK_PREFIX + "\n\nThen follow the task-specific instruction below.\n\n"
        assert messages[0]["content"] == [{"type": "text", "text": text + "You are a UAV."}]
        assert [m["role"] for m in messages] == ["system", "user"]
    else:
        assert [m["role"] for m in messages] == ["system", "user"]
        assert messages[0]["content"] == "You are a UAV."
    reference = route["api_key"]
    expected = "EMPTY" if reference == "EMPTY" else os.environ[reference[2:-1]]
    assert headers["authorization"] == f"Bearer {expected}"


def test_route_values_and_model_overrides(server) -> None:
    glm = resolved("GLM-4.6V-Instant")
    assert glm["rpm_limit"] == 120  # `${FIXTURE_GLM_RPM}` read at start-up
    assert glm["api_key"] == "${FIXTURE_CLOUD_KEY}"  # secrets stay references
    plus = resolved("Qwen3.6-Plus-Thinking", rpm_limit=5, family="none", override_family=True)
    assert plus["rpm_limit"] == 5 and plus["family"] == "none"
    assert plus["tpm_limit"] == 1000000 and plus["request_model"] == "qwen3.6-plus"
    # A model that names its own endpoint needs no route.
    own = resolved("Other-VLM-Instant", api_base="http://127.0.0.1:1/v1", family="qwen_vllm")
    assert "api_source" not in own and own["channel"] == "api"


def test_unknown_route_fails_at_start_naming_the_model() -> None:
    with pytest.raises(ConfigError) as info:
        resolved("Qwen9-VL-Instant")
    message = str(info.value)
    assert "model Qwen9-VL-Instant" in message and "no route 'Qwen9-VL'" in message
    assert "Qwen3.5-9B" in message  # lists what the file has


def test_unknown_family_fails_at_start_naming_the_model() -> None:
    with pytest.raises(ConfigError, match=r"model Mystery-VLM-Thinking: its -Thinking suffix"):
        resolved("Mystery-VLM-Thinking")
    # Without a suffix no switch is needed, and `family:` on the model settles it.
    assert resolved("Mystery-VLM")["request_model"] == "Mystery-VLM"
    assert resolved("Mystery-VLM-Instant", family="glm")["family"] == "glm"
    assert resolved("Mystery-VLM-Instant", family="qwen_vllm")["family"] == "qwen"


def test_missing_variables_are_listed_by_model(monkeypatch) -> None:
    for name in ("FIXTURE_CLOUD_KEY", "FIXTURE_CLOUD_BASE", "FIXTURE_GLM_RPM"):
        monkeypatch.delenv(name, raising=False)
    config = validate_config(
        paper_like(
            {"name": "GLM-4.6V-Instant", "backend": "openai"},
            {"name": "Intern-S1-Pro-Instant", "backend": "openai"},
            {"name": "Qwen3.5-9B-Instant", "backend": "openai"},
            data_root=str(Path(__file__).parents[2] / "resources" / "demo"),
        )
    )
    problems = {(p.subject, p.variable) for p in check(config, environ={"FIXTURE_LOCAL_BASE": "x"})}
    assert problems == {
        ("model GLM-4.6V-Instant", "FIXTURE_CLOUD_BASE"),
        ("model GLM-4.6V-Instant", "FIXTURE_CLOUD_KEY"),
        ("model GLM-4.6V-Instant", "FIXTURE_GLM_RPM"),
        ("model Intern-S1-Pro-Instant", "FIXTURE_CLOUD_BASE"),
        ("model Intern-S1-Pro-Instant", "FIXTURE_CLOUD_KEY"),
    }


def test_literal_key_in_a_routes_file_is_refused_without_echoing_it(tmp_path) -> None:
    routes = tmp_path / "runtime.yaml"
    secret = "sk-literal-Vt3Xw9Pz2Lm5"
    entry = {"api_base": "http://x/v1", "api_key": secret}
    routes.write_text(yaml.safe_dump({"api": {"models": {"M": entry}}}))
    with pytest.raises(ConfigError) as info:
        validate_config(
            {
                "data_root": "d",
                "routes_file": str(routes),
                "models": [{"name": "M", "backend": "openai"}],
            }
        )
    assert secret not in str(info.value) and "route in" in str(info.value)


def test_our_route_format_and_inline_routes(tmp_path) -> None:
    ours = tmp_path / "routes.yaml"
    ours.write_text(
        yaml.safe_dump(
            {
                "routes": {
                    "Local-VLM": {
                        "family": "qwen_vllm",
                        "channel": "local",
                        "serve": {"model": "/models/local-vlm", "gpus": 1},
                        "concurrency": 16,
                    }
                }
            }
        )
    )
    config = validate_config(
        {
            "data_root": "d",
            "routes_file": str(ours),
            "routes": {"Remote-VLM": {"api_base": "http://r/v1", "api_key": "${R_KEY}"}},
            "models": [
                {"name": "Local-VLM-Instant", "backend": "openai"},
                {"name": "Remote-VLM", "backend": "openai"},
            ],
        }
    )
    local, remote = config["models"]
    assert local["serve"]["model"] == "/models/local-vlm" and local["concurrency"] == 16
    assert local["channel"] == "local" and local["request_model"] == "Local-VLM"
    assert remote["api_key"] == "${R_KEY}" and remote["channel"] == "api"
    bad = {"family": "qwen_hf", "serve": {"model": "/m"}}
    ours.write_text(yaml.safe_dump({"routes": {"Local-VLM": bad}}))
    with pytest.raises(ConfigError, match=r"model Local-VLM-Instant: family: 'qwen_hf' is not"):
        validate_config(
            {
                "data_root": "d",
                "routes_file": str(ours),
                "models": [{"name": "Local-VLM-Instant", "backend": "openai"}],
            }
        )


def test_select_models(tmp_path) -> None:
    base = {"data_root": "d", "models": [
        {"name": "a-Instant", "backend": "oracle", "group": "proprietary"},
        {"name": "b-Instant", "backend": "oracle", "group": "spatial"},
        {"name": "c", "backend": "random"},
    ]}  # fmt: skip
    names = lambda **top: [m["name"] for m in validate_config({**base, **top})["models"]]  # noqa: E731
    assert names() == ["a-Instant", "b-Instant", "c"]
    assert names(select=["*-Instant"]) == ["a-Instant", "b-Instant"]
    assert names(select=["group:spatial", "backend:random"]) == ["b-Instant", "c"]
    with pytest.raises(ConfigError, match="select 'd\\*' matches no model"):
        names(select=["d*"])
