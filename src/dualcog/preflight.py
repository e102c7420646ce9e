"""Checks made before any job runs: every problem of a configuration at once, by model.

A long run should not stop after hours because a key variable was never exported, or run at
all on a data root without manifests. The workflow calls `require_ready` when it starts (a dry
run included), so every missing `${VAR}`, replay file and data problem is listed in one message.
"""

from __future__ import annotations

import json
import os
import re
from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dualcog.backends import backend_of, input_files, is_served
from dualcog.errors import ConfigError, DataError
from dualcog.ingest import find_manifests
from dualcog.routes import env_reference
from dualcog.serving.server import vllm_available


class PreflightError(ConfigError):
    """The configuration cannot run as it is; the message lists every problem found."""


@dataclass(frozen=True)
class Problem:
    subject: str  # "data_root" or "model <name>"
    message: str
    variable: str | None = None


def env_references(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """(field path, variable) of every value that is exactly `${VAR}`, at any depth."""
    variable = env_reference(value)
    if variable:
        yield path, variable
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from env_references(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from env_references(item, f"{path}[{index}]")


def data_root_problems(data_root: str) -> list[Problem]:
    variable = env_reference(data_root)
    if variable:
        return [Problem("data_root", f"${{{variable}}} is not set", variable)]
    root = Path(data_root)
    if not root.exists():
        return [Problem("data_root", f"{root} does not exist")]
    if not root.is_dir():
        return [Problem("data_root", f"{root} is not a folder")]
    try:
        manifests = find_manifests(root)
    except DataError as error:
        return [Problem("data_root", str(error))]
    if not manifests:
        return [
            Problem(
                "data_root",
                f"{root} holds no manifests (looked for */image_tasks/manifests/*.json and "
                "*/video_tasks/datasets/*.json)",
            )
        ]
    return duplicate_sample_problems([m.path for m in manifests])


def duplicate_sample_problems(paths: list[Path], shown: int = 5) -> list[Problem]:
    """A sample id in two manifests (a data root holding copies of the benchmark), named with
    both files. Unreadable manifests are left to the ingest, which names what is wrong."""
    first: dict[str, Path] = {}
    clashes: list[tuple[str, Path, Path]] = []
    for path in paths:
        try:
            samples = json.loads(path.read_text(encoding="utf-8")).get("samples")
        except (OSError, ValueError, AttributeError):
            continue
        for sample in samples if isinstance(samples, list) else []:
            sample_id = sample.get("sample_id") if isinstance(sample, dict) else None
            if not isinstance(sample_id, str):
                continue
            if sample_id in first and first[sample_id] != path:
                clashes.append((sample_id, first[sample_id], path))
            first.setdefault(sample_id, path)
    if not clashes:
        return []
    listed = "; ".join(f"sample {s} in {a} and in {b}" for s, a, b in clashes[:shown])
    more = f" (and {len(clashes) - shown} more)" if len(clashes) > shown else ""
    return [
        Problem(
            "data_root",
            f"{len(clashes)} sample id(s) appear in two manifests, as when the data root "
            f"holds more than one copy of the benchmark: {listed}{more}; point data_root at "
            "one copy",
        )
    ]


def model_problems(model: Mapping[str, Any], environ: Mapping[str, str]) -> list[Problem]:
    subject = f"model {model['name']}"
    problems = [
        Problem(subject, f"${{{variable}}} ({field}) is not set", variable)
        for field, variable in env_references(dict(model))
        if variable not in environ
    ]
    field = backend_of(model).input_field
    for source in input_files(model):
        if not Path(source).is_file():
            problems.append(Problem(subject, f"{field} file {source} does not exist"))
    return problems


# `$NAME` or `${NAME}`, as Snakemake expands them in resource values (os.path.expandvars).
_SHELL_VARIABLE = re.compile(r"\$(?:\{(\w+)\}|(\w+))")


def profile_problems(settings: Mapping[str, str], environ: Mapping[str, str]) -> list[Problem]:
    """Resource values of the active profile (setting -> raw text) that name an unset variable,
    one problem per variable: Snakemake would pass them on literally
    (`--account=$DUALCOG_SLURM_ACCOUNT`)."""
    users: dict[str, list[str]] = defaultdict(list)
    for setting, raw in settings.items():
        for match in _SHELL_VARIABLE.finditer(str(raw)):
            variable = match.group(1) or match.group(2)
            if variable not in environ:
                users[variable].append(setting)
    problems = []
    for variable, used in users.items():
        shown = ", ".join(used[:3]) + (f" and {len(used) - 3} more" if len(used) > 3 else "")
        problems.append(Problem("profile", f"${variable} ({shown}) is not set", variable))
    return problems


def check(
    config: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
    profile: Mapping[str, str] | None = None,
) -> list[Problem]:
    """Every problem of a validated configuration (empty when it can run), and of the
    profile's resource settings when given."""
    environ = os.environ if environ is None else environ
    problems = data_root_problems(str(config["data_root"]))
    problems.extend(profile_problems(profile or {}, environ))
    for model in config["models"]:
        problems.extend(model_problems(model, environ))
    return problems


def server_problems(config: Mapping[str, Any]) -> list[Problem]:
    """Served models whose vLLM cannot start on this machine, in this environment."""
    return [
        Problem(f"model {model['name']}", problem)
        for model in config["models"]
        if is_served(model) and (problem := vllm_available(model))
    ]


def _fixes(users: Mapping[str, list[str]]) -> str:
    """What to do about the missing variables: a model's key is never written in a file
    (literal keys are refused), so the profile is named only for a profile's own variable."""
    subjects = {subject for names in users.values() for subject in names}
    fixes = ["export them"]
    if any(subject.startswith("model ") for subject in subjects):
        fixes.append("drop the models that need them")
    if "profile" in subjects:
        fixes.append("write the profile's resource values without them")
    return ", or ".join(fixes)


def report(problems: list[Problem], source: str) -> str:
    lines = [f"{len(problems)} problem(s) in {source}; nothing was run:"]
    by_subject: dict[str, list[str]] = defaultdict(list)
    for problem in problems:
        by_subject[problem.subject].append(problem.message)
    for subject, messages in by_subject.items():
        lines.append(f"  {subject}: " + "; ".join(messages))
    users: dict[str, list[str]] = defaultdict(list)
    for problem in problems:
        if problem.variable and problem.subject not in users[problem.variable]:
            users[problem.variable].append(problem.subject)
    if users:
        lines.append(f"missing environment variables ({_fixes(users)}):")
        for variable, subjects in sorted(users.items()):
            names = [subject.removeprefix("model ") for subject in subjects]
            lines.append(f"  {variable}: {len(names)} ({', '.join(names)})")
    return "\n".join(lines)


def require_ready(
    config: Mapping[str, Any],
    source: str = "the configuration",
    profile: Mapping[str, str] | None = None,
) -> None:
    """Raise PreflightError listing every problem; return quietly when there is none."""
    problems = check(config, profile=profile)
    if problems:
        raise PreflightError(report(problems, source))


def require_servers(config: Mapping[str, Any], source: str = "the configuration") -> None:
    """Raise PreflightError when a served model's vLLM cannot start here. For runs whose
    served jobs start on this machine, in this environment (not dry runs, clusters or conda),
    before any job."""
    problems = server_problems(config)
    if problems:
        raise PreflightError(report(problems, source))
