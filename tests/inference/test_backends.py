"""The backend registry (dualcog.backends): one seam, no backend names compared elsewhere."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from frames import arrow

from dualcog import backends, schemas
from dualcog.backends import REGISTRY, Backend, RunInputs, register
from dualcog.config import load_schema
from dualcog.inference import run_model
from dualcog.inference.outcome import outcome_path, read_outcome, record_outcome
from dualcog.inference.rows import response_row
from dualcog.preflight import model_problems

ROOT = Path(__file__).resolve().parents[2]
REGISTRY_FILE = ROOT / "src" / "dualcog" / "backends.py"


def _comparison_patterns(names: list[str]) -> list[re.Pattern[str]]:
    alternatives = "|".join(re.escape(name) for name in names)
    literal = rf"""["'](?:{alternatives})["']"""
    return [
        # a name literal on either side of == / != / in
        re.compile(rf"(?:==|!=|\bin)\s*{literal}"),
        re.compile(rf"{literal}\s*(?:==|!=|\bnot in\b|\bin\b)"),
        # a tuple / set / list of names (a membership test in waiting)
        re.compile(rf"[(\[{{]\s*{literal}\s*,\s*{literal}"),
        # the backend value itself compared: model["backend"] == x, backend in (...), match
        re.compile(r"""\[["']backend["']\]\s*(?:==|!=|\bin\b|\bnot in\b)"""),
        re.compile(r"""\.get\(["']backend["']\)\s*(?:==|!=|\bin\b|\bnot in\b)"""),
        re.compile(r"""\bbackend\s*(?:==|!=|\bnot in\b|\bin\b)\s*["'(\[{A-Z]"""),
        re.compile(r"""\bmatch\s+.*backend"""),
    ]


def _offending_lines(text: str, names: list[str]) -> list[str]:
    patterns = _comparison_patterns(names)
    return [
        line.strip()
        for line in text.splitlines()
        if not line.lstrip().startswith("#") and any(p.search(line) for p in patterns)
    ]


def _source_files() -> list[Path]:
    files = [ROOT / "Snakefile"]
    files += sorted((ROOT / "src" / "dualcog").rglob("*.py"))
    files += sorted((ROOT / "scripts").rglob("*.py"))
    files += sorted((ROOT / "rules").rglob("*.smk"))
    return [path for path in files if path != REGISTRY_FILE]


def test_the_detector_finds_the_comparisons_it_is_for() -> None:
    names = list(REGISTRY)
    caught = [
        'if model.get("backend") == "openai":',
        'if m["backend"] != "replay" and x:',
        "if backend in OFFLINE_BACKENDS:",
        'elif backend == "random":',
        'OFFLINE = ("oracle", "random", "simulated")',
        'if "replay" == kind:',
        "match model.get('backend'):",
    ]
    assert [line for line in caught if not _offending_lines(line, names)] == []
    passed = [
        'rng = _rng(seed, sample_id, "random")',
        'response_row(prompt, name, "replay", status="missing")',
        "if backend_of(model).counts_failures:",
        '"backend": model.get("backend") or "",',
        'value = model.get("replay", model.get("replay_path"))',
    ]
    assert [line for line in passed if _offending_lines(line, names)] == []


def test_no_backend_name_is_compared_outside_the_registry() -> None:
    names = list(REGISTRY)
    found = {
        str(path.relative_to(ROOT)): lines
        for path in _source_files()
        if (lines := _offending_lines(path.read_text(encoding="utf-8"), names))
    }
    assert found == {}, "ask dualcog.backends for a declared property instead"


def test_every_runner_loads_and_the_schema_knows_each_backend() -> None:
    schema = load_schema()["$defs"]["model"]
    assert schema["properties"]["backend"]["enum"] == list(REGISTRY)
    required_by_schema = {
        rule["if"]["properties"]["backend"]["const"]: rule["then"]["required"]
        for rule in schema["allOf"]
        if "backend" in rule["if"].get("properties", {})
    }
    for backend in REGISTRY.values():
        assert callable(backend.load_runner()), backend.name
        assert required_by_schema.get(backend.name, []) == list(backend.required), backend.name
        if backend.input_field:
            assert backend.input_field in schema["properties"], backend.name


def test_a_name_is_registered_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backends, "REGISTRY", dict(REGISTRY))
    with pytest.raises(ValueError, match="registered twice"):
        register(Backend("oracle", "x:y", "again"))


def test_unknown_backend_names_the_model() -> None:
    with pytest.raises(ValueError, match=r"model 'x': unknown backend 'magic' \(one of oracle"):
        backends.backend_of({"name": "x", "backend": "magic"})


# --- docs/extending.md "Add a backend", followed with a toy backend ---------------------------


def run_toy(model, prompt_rows, inputs: RunInputs):
    """Answers from a JSON file {sample_id: text}; a sample it lacks is a timeout."""
    answers = json.loads(Path(model["answers"]).read_text(encoding="utf-8"))
    rows = []
    for prompt in prompt_rows:
        text = answers.get(prompt["sample_id"])
        if text is None:
            rows.append(response_row(prompt, model["name"], "toy", status="error",
                                     error_type="timeout", error_message="no answer"))  # fmt: skip
        else:
            rows.append(response_row(prompt, model["name"], "toy", raw_text=text))
    return rows


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> Backend:
    monkeypatch.setattr(backends, "REGISTRY", dict(REGISTRY))
    return register(Backend(
        "toy", f"{__name__}:run_toy", "answers from a JSON file",
        counts_failures=True, input_field="answers", required=("answers",),
    ))  # fmt: skip


def _prompts(ids: list[str]) -> pd.DataFrame:
    rows = [
        {"sample_id": sid, "task": "self_position", "request_key": f"rk-{sid}",
         "system_text": "s", "user_text": "u", "media_keys": [], "media_kinds": [],
         "offered_option_ids": ["A", "B"]}
        for sid in ids
    ]  # fmt: skip
    return schemas.to_table(pd.DataFrame(rows), schemas.PROMPTS).to_pandas()


def test_a_toy_backend_is_one_registry_entry_and_its_runner(toy: Backend, tmp_path: Path) -> None:
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({"a": '{"answer_option_id": "A"}'}))
    model = {"name": "Toy-Run", "backend": "toy", "answers": str(answers)}
    out = run_model(model, arrow(_prompts(["a", "b"])), None, tmp_path, tmp_path).to_pandas()
    assert out["status"].tolist() == ["ok", "error"]
    assert out["backend"].tolist() == ["toy", "toy"]
    # Its declared properties reach the workflow with no other file touched.
    outcome = record_outcome(model, "self_position", out, tmp_path)
    assert outcome is not None and outcome.failed  # a failed run does not report success
    written = read_outcome(outcome_path(tmp_path, "Toy-Run", "self_position"))
    assert written == outcome
    assert backends.input_files(model) == [str(answers)]
    assert not backends.any_sends_media([model]) and not backends.is_served(model)
    assert model_problems(model, {}) == []
    gone = {**model, "answers": str(tmp_path / "gone.json")}
    assert [p.message for p in model_problems(gone, {})] == [
        f"answers file {tmp_path / 'gone.json'} does not exist"
    ]
    with pytest.raises(ValueError, match="backend toy needs `answers`"):
        run_model({"name": "t", "backend": "toy"}, arrow(_prompts(["a"])), None, tmp_path,
                  tmp_path)  # fmt: skip


def test_failures_count_only_where_declared(tmp_path: Path) -> None:
    row = response_row({"sample_id": "a", "task": "t", "request_key": "k"}, "m", "x",
                       status="error", error_type="timeout")  # fmt: skip
    frame = pd.DataFrame([row])
    for backend in REGISTRY.values():
        model = {"name": "m", "backend": backend.name, "replay": "r"}
        outcome = record_outcome(model, "t", frame, tmp_path)
        assert (outcome is not None) == backend.counts_failures, backend.name
