"""Whatever a run presents belongs to its config.

Several configs may run into the same `results/` (the demo, then a user's own): the files
they share a name with are rewritten by each run, but a table in a format, a plot, a
comparison or an explorer page that only the earlier config makes would stay and be read as
this run's. So before its first job a run removes, from the folders a person reads, every file
that its own config does not make (`remove_foreign_outputs`, from the Snakefile's `onstart`);
the intermediate files under `results/` (responses, parsed answers, scores) are per model and
stay, so that switching back reuses them. A Snakemake report built with a config other than
the one whose run wrote `results/` is refused (`check_report_config`): it would show one
config's tables beside another's.

The Snakefile's process imports this module: standard library only.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

from dualcog.errors import ConfigError

# The folders under results/ whose every file is an output a person reads (explorer: only
# its per-model pages; its data and media folders are per model and keyed by their pages).
PRESENTED_FOLDERS = ("tables", "plots", "compare")
EXPLORER_PAGES = "explorer/*.html"


def presented_files(results: Path) -> list[Path]:
    """Every file in the presented folders of `results`, in a stable order."""
    found = [p for name in PRESENTED_FOLDERS for p in (results / name).glob("*") if p.is_file()]
    return sorted([*found, *results.glob(EXPLORER_PAGES)])


def foreign_outputs(results: Path, expected: Iterable[str | Path]) -> list[Path]:
    """The presented files of `results` that are not among `expected` (the config's outputs,
    as the workflow names them: relative to the working directory, like `results`)."""
    keep = {Path(p) for p in expected}
    return [p for p in presented_files(results) if p not in keep]


def remove_foreign_outputs(results: Path, expected: Iterable[str | Path]) -> list[Path]:
    """Remove `foreign_outputs`; the paths removed."""
    removed = foreign_outputs(results, expected)
    for path in removed:
        path.unlink(missing_ok=True)
    return removed


def removed_text(removed: Sequence[Path], limit: int = 6) -> str:
    """One console line for what `remove_foreign_outputs` removed."""
    names = ", ".join(str(p) for p in removed[:limit])
    more = f" and {len(removed) - limit} more" if len(removed) > limit else ""
    return (
        f"removed {len(removed)} output(s) that this config does not make, left by a run of "
        f"another config: {names}{more}"
    )


def _few(names: Sequence[str], limit: int = 5) -> str:
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return (", ".join(names[:limit]) or "none") + more


def report_requested(argv: Sequence[str]) -> bool:
    """Whether Snakemake's command line asks for a report (`--report`, `--report=FILE`)."""
    return any(arg == "--report" or arg.startswith("--report=") for arg in argv)


def check_report_config(stamp: Path, models: Sequence[str], config_source: str) -> None:
    """Refuse a report of `models` when the run that wrote `stamp` (results/stamp.json) had
    other models: its tables and pages are another config's. No stamp: nothing to mix yet."""
    if not stamp.is_file():
        return
    try:
        written = list(json.loads(stamp.read_text(encoding="utf-8"))["models"])
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ConfigError(f"{stamp}: unreadable provenance stamp ({error})") from None
    if sorted(written) == sorted(models):
        return
    only_there = sorted(set(written) - set(models))
    only_here = sorted(set(models) - set(written))
    raise ConfigError(
        f"{stamp.parent}/ holds the outputs of a run of another config (models only there: "
        f"{_few(only_there)}; models only in {config_source}: {_few(only_here)}). A report "
        f"of {config_source} would mix the two: "
        f"run it first, then report it: `make report CONFIG={config_source}` does both "
        f"(or `snakemake --configfile {config_source}`, then the same with "
        "`--report report.html`)"
    )
