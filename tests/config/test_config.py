from __future__ import annotations

import os
from pathlib import Path

import pytest

from dualcog.config import (
    SCHEMA_PATH,
    answer_settings,
    load_config,
    load_schema,
    model_fingerprint,
    model_tasks,
    non_answer_keys,
    validate_config,
)
from dualcog.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


def _config(**model) -> dict:
    return {"data_root": "data", "models": [{"name": "m", "backend": "oracle", **model}]}


def test_shipped_config_is_valid() -> None:
    config = load_config(REPO / "config" / "config.yaml")
    names = [m["name"] for m in config["models"]]
    assert names[:2] == ["oracle", "random"]
    assert sum(m["backend"] == "simulated" for m in config["models"]) >= 3
    assert config["media"]["max_width"] == 640


def test_defaults_filled() -> None:
    config = validate_config(_config())
    model = config["models"][0]
    assert model["temperature"] == 0.2 and model["max_tokens"] == 2048  # PROTOCOL §11.1
    assert config["tasks"][0] == "landmark_position"
    assert model_tasks(config, model) == config["tasks"]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"backend": "gpt"}, "models[0] (m).backend"),
        ({"skill": 2}, "models[0] (m).skill"),
        (
            {"name": "bad name/../x"},
            "models[0] (bad name/../x).name: 'bad name/../x' does not match",
        ),
        ({"quirks": ["sparkles"]}, "models[0] (m).quirks[0]"),
        ({"backend": "replay"}, "'replay' is a required property"),
        ({"colour": "red"}, "Additional properties are not allowed"),
    ],
)
def test_schema_errors_name_the_field(change, expected) -> None:
    with pytest.raises(ConfigError) as info:
        validate_config(_config(**change), "my.yaml")
    assert "my.yaml" in str(info.value)
    assert expected in str(info.value)


def test_literal_api_key_refused_without_echoing_it() -> None:
    with pytest.raises(ConfigError) as info:
        validate_config(_config(backend="openai", api_base="http://x", api_key="sk-secret-123"))
    assert "sk-secret-123" not in str(info.value)
    ok = validate_config(_config(backend="openai", api_base="http://x", api_key="${MY_KEY}"))
    assert ok["models"][0]["api_key"] == "${MY_KEY}"


def test_duplicate_model_names() -> None:
    config = {"data_root": "d", "models": [{"name": "a", "backend": "oracle"}] * 2}
    with pytest.raises(ConfigError, match="twice"):
        validate_config(config)


def test_fingerprint_ignores_throughput_and_secrets() -> None:
    base = validate_config(_config(backend="openai", api_base="http://x"))["models"][0]
    assert base["main_table"] is True
    tuned = {**base, "rpm_limit": 30, "concurrency": 8, "api_key": "${OTHER}"}
    assert model_fingerprint(base) == model_fingerprint(tuned)
    # Taking a run off the main tables is a table setting: it reruns no inference.
    assert model_fingerprint(base) == model_fingerprint({**base, "main_table": False})
    assert "api_key" not in answer_settings(tuned)
    hotter = {**base, "temperature": 0.7}
    assert model_fingerprint(base) != model_fingerprint(hotter)


def test_answer_neutral_settings_are_the_ones_the_schema_marks() -> None:
    """The fingerprint's exclusions come from the schema's `x-answer-neutral` marks: each is a
    model property, and a setting that shapes the request or the answer is not marked."""
    properties = load_schema()["$defs"]["model"]["properties"]
    neutral = non_answer_keys()
    marked = {k for k, prop in properties.items() if prop.get("x-answer-neutral")}
    assert neutral - marked == {"repeat_of", "repeat_label"}  # added after validation
    assert {"rpm_limit", "concurrency", "api_key", "api_base", "timeout", "batch"} <= neutral
    answering = {
        "backend", "temperature", "max_tokens", "seed", "request_model", "replay",
        "extra_body", "video_mode", "video_frames", "serve", "reasoning_effort",
    }  # fmt: skip
    assert answering <= set(properties) and not answering & neutral
    base = validate_config(_config(backend="openai", api_base="http://x"))["models"][0]
    for key in sorted(neutral):
        assert key not in answer_settings({**base, key: "changed"}), key


def test_model_task_subset_keeps_registry_order() -> None:
    config = validate_config(
        {
            "data_root": "d",
            "tasks": ["behavior", "landmark_position", "self_position"],
            "models": [{"name": "m", "backend": "oracle", "tasks": ["self_position", "behavior"]}],
        }
    )
    assert model_tasks(config, config["models"][0]) == ["self_position", "behavior"]


# -- config files that are not YAML mappings: file and line named --------------------------


def test_malformed_yaml_names_file_and_line(tmp_path) -> None:

    path = tmp_path / "bad.yaml"
    path.write_text("data_root: x\nmodels:\n  - name: a\n   backend: oracle\n")
    with pytest.raises(ConfigError, match=rf"config file {path}, line 4, column 4: not valid YAML"):
        load_config(path)


def test_empty_config_file_is_named(tmp_path) -> None:

    path = tmp_path / "empty.yaml"
    path.write_text("# nothing here\n")
    with pytest.raises(ConfigError, match=rf"^config file {path} is empty$"):
        load_config(path)


def test_malformed_routes_file_names_file_and_line(tmp_path) -> None:
    from dualcog.routes import read_routes_file

    path = tmp_path / "routes.yaml"
    path.write_text("routes:\n  a: {model: [x\n")
    with pytest.raises(ConfigError, match=rf"routes_file {path}, line \d+, column \d+"):
        read_routes_file(path)
    path.write_bytes(b"routes:\n  a: {model: \xff}\n")
    with pytest.raises(ConfigError, match=rf"routes_file {path}, line 2: not UTF-8"):
        read_routes_file(path)


@pytest.mark.parametrize("name", ["</script><script>alert(1)</script>", "A & B", 'x"y', "x`y"])
def test_display_name_refuses_markup(name) -> None:
    config = {
        "data_root": "data",
        "models": [{"name": "m", "backend": "oracle", "display_name": name}],
    }
    with pytest.raises(ConfigError, match="display_name"):
        validate_config(config)


# -- one source per config fact: the schema (in the package) --------------------------------


def test_schema_enums_are_the_codes_constants() -> None:
    from dualcog.backends import BACKEND_NAMES
    from dualcog.inference.offline import SIMULATED_QUIRKS
    from dualcog.parsing.scale import CONFIGURABLE_SCALES
    from dualcog.prompts.render import VIDEO_MODES
    from dualcog.switches import CONFIG_FAMILIES, FAMILY_SPELLINGS
    from dualcog.tables.model import GROUP_ORDER
    from dualcog.tasks import REQUEST_KINDS

    schema = load_schema()
    model = schema["$defs"]["model"]["properties"]
    tasks = [kind.task for kind in REQUEST_KINDS]
    assert schema["$defs"]["task"]["enum"] == tasks
    assert schema["properties"]["tasks"]["default"] == tasks
    assert schema["properties"]["tasks"]["items"] == model["tasks"]["items"]
    assert model["backend"]["enum"] == list(BACKEND_NAMES)
    assert model["video_mode"]["enum"] == list(VIDEO_MODES)
    assert model["bbox_scale"]["enum"] == list(CONFIGURABLE_SCALES)
    assert model["group"]["enum"] == list(GROUP_ORDER)
    assert set(model["quirks"]["items"]["enum"]) == set(SIMULATED_QUIRKS)
    assert set(model["family"]["enum"]) == {*CONFIG_FAMILIES, *FAMILY_SPELLINGS}


def test_the_schema_reads_the_same_with_either_yaml_loader() -> None:
    """load_schema takes libyaml's loader where PyYAML has it (start-up CPU)."""
    import yaml

    text = SCHEMA_PATH.read_text(encoding="utf-8")
    assert load_schema() == yaml.safe_load(text)


def test_defaults_come_from_the_schema() -> None:
    config = validate_config(_config())
    assert config["media"] == {
        "max_width": 640,
        "max_height": 480,
        "jpeg_quality": 80,
        "store": "results/media/store",
    }
    assert config["tables"] == {"formats": ["csv", "md"]}
    model = config["models"][0]
    assert (model["group"], model["video_mode"], model["video_frames"]) == (
        "baseline",
        "video_url",
        16,
    )
    assert (model["temperature"], model["max_tokens"], model["seed"]) == (0.2, 2048, 0)
    partial = validate_config({**_config(), "media": {"max_width": 320}})["media"]
    assert (partial["max_width"], partial["max_height"]) == (320, 480)


def test_tpm_limit_without_an_estimate_fails_at_validation() -> None:
    with pytest.raises(ConfigError, match=r"models\[0\] \(m\).*estimated_tokens_per_request"):
        validate_config(_config(backend="openai", api_base="http://x", tpm_limit=1000))
    validate_config(
        _config(
            backend="openai", api_base="http://x", tpm_limit=1000, estimated_tokens_per_request=10
        )
    )


def test_a_wheel_install_validates_a_config(tmp_path) -> None:
    """The schema ships in the wheel: an install outside the source tree validates."""
    import shutil
    import subprocess
    import sys

    # Built from a copy, so that setuptools' build/ folder lands outside the checkout.
    source = tmp_path / "source"
    shutil.copytree(REPO / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", source)
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "-q", "-w", str(wheels)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    [wheel] = wheels.glob("dualcog-*.whl")
    venv = tmp_path / "venv"
    # Without a pip of its own (installing one cost 3.8 CPU-s): this pip installs into it.
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)],
        check=True,
    )  # fmt: skip
    python = venv / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
         "--no-index", "-q", str(wheel)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    config = tmp_path / "elsewhere" / "config.yaml"
    config.parent.mkdir()
    config.write_text("data_root: /data\nmodels:\n  - {name: m, backend: oracle}\n")
    script = (
        "import sys, dualcog.config as c; "
        "assert 'site-packages' in c.__file__, c.__file__; "
        "print(c.load_config(sys.argv[1])['models'][0]['video_frames'])"
    )
    result = subprocess.run(
        [str(python), "-c", script, str(config)],
        capture_output=True, text=True, cwd=config.parent, timeout=120,
        env={"PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "16"


def test_the_config_check_command_names_file_and_line(tmp_path) -> None:
    import subprocess
    import sys

    bad = tmp_path / "bad.yaml"
    bad.write_text("data_root: x\nmodels: [\n")
    good = tmp_path / "good.yaml"
    good.write_text("data_root: x\nmodels:\n  - {name: m, backend: oracle}\n")
    result = subprocess.run(
        [sys.executable, "-m", "dualcog.config", str(good), str(bad)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 1
    assert f"{good}: valid (1 model runs)" in result.stdout
    assert f"config file {bad}, line 3, column 1: not valid YAML" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_display_name_from_a_route_is_checked_too() -> None:
    config = {
        "data_root": "data",
        "routes": {"r": {"api_base": "http://x", "display_name": "<img src=x onerror=alert(1)>"}},
        "models": [{"name": "m", "backend": "openai", "route": "r"}],
    }
    with pytest.raises(ConfigError, match=r"(?s)after routes.*display_name.*are refused"):
        validate_config(config)


def test_batch_mode_keys_from_a_route_with_schema_defaults() -> None:
    from dualcog.inference.batch import batch_settings

    config = {
        "data_root": "data",
        "routes": {"r": {"api_base": "http://x", "batch": True, "batch_poll_s": 5}},
        "models": [{"name": "m", "backend": "openai", "route": "r"}],
    }
    model = validate_config(config)["models"][0]
    settings = batch_settings(model)
    assert settings is not None and settings.poll_s == 5
    assert (settings.max_requests, settings.max_bytes) == (50000, 200_000_000)
    # Defaults also for an entry that was never validated (tests, notebooks).
    assert batch_settings({"batch": True}) == batch_settings({**model, "batch_poll_s": 30})
    assert batch_settings({"batch": False}) is None
    # Batch mode sends the same bodies: it reruns nothing.
    direct = {**model, "batch": False}
    assert model_fingerprint(model) == model_fingerprint(direct)


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ({"backend": "oracle", "batch": True}, r"batch: backend oracle .*needs an openai model"),
        (
            {"backend": "openai", "batch": True, "serve": {"model": "w"}},
            r"batch: a model the workflow serves itself",
        ),
        ({"backend": "openai", "api_base": "http://x", "batch_max_requests": 0}, "minimum"),
    ],
)
def test_batch_mode_refused_where_there_is_no_batch_api(model, expected) -> None:
    with pytest.raises(ConfigError, match=expected):
        validate_config(_config(**model))


def test_a_run_name_too_long_for_its_files_is_refused_at_validation(tmp_path) -> None:
    import socket

    from dualcog import atomic
    from dualcog.config import LONGEST_RUN_FILE, RUN_NAME_MAX

    def config(name: str) -> dict:
        return {"data_root": "d", "models": [{"name": name, "backend": "oracle"}]}

    with pytest.raises(ConfigError) as info:
        validate_config(config("m" * 300), "config/mine.yaml")
    message = str(info.value)
    shown = f"{'m' * 40}...{'m' * 8}"
    assert message.startswith(f"invalid configuration in config/mine.yaml: model {shown} field")
    assert "field 'name': 300 characters, at most 148" in message and RUN_NAME_MAX == 148
    # The longest name allowed: its longest file, through the longest temporary name (a pid
    # of 7 digits, a host name of 64 characters), is a real file of 255 bytes.
    longest = "m" * RUN_NAME_MAX
    validate_config(config(longest), "config/mine.yaml")
    target = tmp_path / LONGEST_RUN_FILE.format(model=longest)
    temporary = atomic.temporary_path(target).name
    host = socket.gethostname().replace(".", "_")
    worst = temporary.replace(host, "h" * 64).replace(f".{os.getpid()}-", ".4194303-")
    assert len(worst) == 255
    (tmp_path / worst).write_bytes(b"")
    with pytest.raises(ConfigError, match="at most 148"):
        validate_config(config(longest + "m"), "config/mine.yaml")
    # A repeat's run name carries its `~r<k>`: 144 + "~r10" fits, 145 + "~r10" does not.
    repeated = config("m" * 144)
    repeated["models"][0].update(backend="simulated", repeats=10)
    validate_config(repeated, "config/mine.yaml")
    repeated["models"][0]["name"] = "m" * 145
    with pytest.raises(ConfigError, match=r"m\.\.\.mmmm~r10 field 'name': 149 characters"):
        validate_config(repeated, "config/mine.yaml")


def test_no_rule_names_a_file_longer_after_the_run_name_than_the_limit_allows() -> None:
    """LONGEST_RUN_FILE is the longest file name of the rules that holds a run name."""
    import re

    from dualcog.config import LONGEST_RUN_FILE

    repo = Path(__file__).resolve().parents[2]
    suffixes = []
    for rules in sorted((repo / "rules").glob("*.smk")):
        text = rules.read_text()
        pattern = r"\{+(?:wildcards\.)?(?:model|run)\}+([^/\"'\s{]*(?:\{[^/\"'\s]*)?)"
        suffixes += [re.sub(r"\{+\w+\}+", "X", m) for m in re.findall(pattern, text)]
    assert suffixes and max(map(len, suffixes)) <= len(LONGEST_RUN_FILE) - len("{model}")


def test_a_comparison_of_two_long_run_names_is_refused_when_the_workflow_is_parsed() -> None:
    from dualcog.stats.pairs import comparison_pairs

    def config(a: str, b: str) -> dict:
        return {"models": [{"name": a}, {"name": b}], "compare": [[a, b]]}

    # 75 + 76 + "__vs__.parquet" (14) = 165 characters: 255 with a temporary name's 90
    assert comparison_pairs(config("a" * 75, "b" * 76)) == [("a" * 75, "b" * 76)]
    with pytest.raises(ConfigError, match=r"would be 166 characters, at most 165"):
        comparison_pairs(config("a" * 76, "b" * 76))
