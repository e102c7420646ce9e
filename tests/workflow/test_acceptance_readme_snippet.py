"""The README's library snippet runs as written from a folder other than the clone.

The snippet finds the clone from `dualcog.__file__`; that line is run as written from a
temporary folder. Its other lines then run unchanged on a working directory holding the demo
benchmark and the recorded run's responses (made by the real workflow here, so the clone's own
results/ stays untouched), with `checkout` pointing there.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from workflow_runner import REPO, run_snakemake, write_config

from dualcog.tasks import REQUEST_KINDS

pytestmark = [pytest.mark.workflow, pytest.mark.integration]

CHECKOUT_LINE = "checkout = Path(dualcog.__file__).resolve().parents[2]"
MODEL = "recorded-run-Instant"


def readme_snippet() -> str:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Using the library without Snakemake", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "no python block under 'Using the library without Snakemake'"
    return match.group(1)


def run_python(code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def test_the_snippet_finds_the_clone_from_any_folder(tmp_path) -> None:
    snippet = readme_snippet()
    assert CHECKOUT_LINE in snippet
    code = f"from pathlib import Path\nimport dualcog\n{CHECKOUT_LINE}\nprint(checkout)"
    found = run_python(code, tmp_path)
    assert found.returncode == 0, found.stderr
    assert Path(found.stdout.strip()) == REPO


def test_the_snippet_runs_after_the_demo_from_another_folder(tmp_path) -> None:
    workdir = tmp_path / "clone"
    workdir.mkdir()
    (workdir / "resources").symlink_to(REPO / "resources")
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    write_config(workdir, config)  # paths relative to the clone, as `make demo` reads them
    outputs = [f"results/responses/{MODEL}/{kind.task}.parquet" for kind in REQUEST_KINDS]
    run_snakemake(workdir, *outputs)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    code = readme_snippet().replace(CHECKOUT_LINE, f"checkout = Path({str(workdir)!r})")
    result = run_python(code, elsewhere)
    assert result.returncode == 0, result.stderr[-3000:]
    assert MODEL in result.stdout, result.stdout
