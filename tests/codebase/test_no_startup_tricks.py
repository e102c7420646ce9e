"""The product code (src/, scripts/, the Snakefile and rules/) blocks no imports, skips no
interpreter teardown, hides nothing from the garbage collector and assigns to no attribute
of Snakemake's `snakemake` or `workflow` objects: each of those is surprising to a reader and
breaks quietly on an upgrade."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FORBIDDEN = {
    "an import blocker": re.compile(r"\bsys\.meta_path\b"),
    "an exit without teardown": re.compile(r"\bos\._exit\("),
    "a frozen collector": re.compile(r"\bgc\.freeze\("),
    "a patched Snakemake object": re.compile(
        r"^\s*(snakemake|workflow)(\.\w+)+\s*=[^=]|setattr\(\s*(snakemake|workflow)\b", re.M
    ),
}


def product_files() -> list[Path]:
    files = [REPO / "Snakefile", *sorted((REPO / "rules").glob("*.smk"))]
    files += sorted((REPO / "scripts").rglob("*.py")) + sorted((REPO / "src").rglob("*.py"))
    return files


def findings(paths: list[Path]) -> list[str]:
    found = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        for what, pattern in FORBIDDEN.items():
            for match in pattern.finditer(text):
                line = text.count("\n", 0, match.start()) + 1
                found.append(f"{path.relative_to(path.parents[1])}:{line}: {what}")
    return found


def test_the_product_code_has_no_start_up_tricks() -> None:
    paths = product_files()
    assert len(paths) > 100  # the tree was found
    assert findings(paths) == []


def test_each_trick_is_found(tmp_path: Path) -> None:
    sample = tmp_path / "pkg" / "job.py"
    sample.parent.mkdir()
    sample.write_text(
        "import gc, os, sys\nsys.meta_path.insert(0, None)\ngc.freeze()\n"
        "workflow.scheduler.job_rate_limiter = None\nif x == 1:\n    os._exit(0)\n"
        "snakemake.params == 1\n"
    )
    assert findings([sample]) == [
        "pkg/job.py:2: an import blocker",
        "pkg/job.py:6: an exit without teardown",
        "pkg/job.py:3: a frozen collector",
        "pkg/job.py:4: a patched Snakemake object",
    ]
