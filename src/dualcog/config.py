"""Workflow configuration: loading, schema validation with readable messages, defaults."""

from __future__ import annotations

import copy
import fnmatch
import functools
import hashlib
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dualcog.atomic import TEMPORARY_NAME_EXTRA
from dualcog.backends import backend_of
from dualcog.errors import ConfigError
from dualcog.repeats import REPEAT_OF, expand_repeats, fold_repeats
from dualcog.routes import env_reference, read_routes_file, read_yaml, resolve_model
from dualcog.tasks import REQUEST_BY_TASK, REQUEST_KINDS

if TYPE_CHECKING:
    import jsonschema

SCHEMA_PATH = Path(__file__).with_name("config_schema.yaml")  # package data (pyproject.toml)


def load_schema(path: Path = SCHEMA_PATH) -> dict:
    import yaml  # here: jobs that only look a model up never load it

    # Our own file, read at every Snakemake start-up (each cluster job's too): libyaml's
    # loader where PyYAML has it, a tenth of the pure-Python one's CPU (0.003 s against
    # 0.029); tests/config/test_config.py checks that both read the same schema.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with open(path, encoding="utf-8") as handle:
        return yaml.load(handle, Loader=loader)


def schema_defaults(node: Mapping[str, Any]) -> dict[str, Any]:
    """The `default` of every property of an object schema; an object property without one
    gets the defaults of its own properties (so `media: {}` and no `media` mean the same)."""
    defaults = {}
    for key, prop in node.get("properties", {}).items():
        if "default" in prop:
            defaults[key] = copy.deepcopy(prop["default"])
        elif prop.get("type") == "object" and schema_defaults(prop):
            defaults[key] = schema_defaults(prop)
    return defaults


@functools.cache
def _schema() -> tuple[dict, dict[str, Any], dict[str, Any]]:
    """The schema, its defaults and a model's defaults (the schema is the one place defaults
    are written); read on first validation, so that jobs importing this module do not."""
    schema = load_schema()
    return schema, schema_defaults(schema), schema_defaults(schema["$defs"]["model"])


def model_defaults() -> dict[str, Any]:
    """The schema's default of every model setting that has one."""
    return copy.deepcopy(_schema()[2])


@functools.cache
def non_answer_keys() -> frozenset[str]:
    """The model settings the schema marks `x-answer-neutral` (how fast, where and at what
    cost answers arrive, how they are shown; never what they say): left out of the
    fingerprint so that tuning them does not rerun a model."""
    properties = _schema()[0]["$defs"]["model"]["properties"]
    marked = {key for key, prop in properties.items() if prop.get("x-answer-neutral")}
    # What `expand_repeats` adds to a repeat's entry after validation: the set it belongs to
    # and its label (its index stays: a larger set re-sends no repeat).
    return frozenset(marked | {REPEAT_OF, "repeat_label"})


# Parts of a `serve:` block that can change answers (the weights and the server's options);
# ports, GPUs and timeouts cannot.
SERVE_ANSWER_KEYS = ("model", "args")
SELECT_KEYS = ("group", "channel", "family", "backend")
MISSING_DATA_ROOT = (
    "no `data_root`: say where the released benchmark is (data_root: /path/to/UAV-DualCog). "
    "A config given with --configfile is used on its own; it does not inherit the demo's "
    "settings from config/config.yaml (see docs/configuration.md)"
)


def _location(error: jsonschema.ValidationError, config: Mapping[str, Any]) -> str:
    parts = []
    node: Any = config
    for part in error.absolute_path:
        if isinstance(part, int) and isinstance(node, list) and part < len(node):
            item = node[part]
            label = item.get("name") if isinstance(item, dict) else None
            parts.append(f"[{part}]" + (f" ({label})" if label else ""))
            node = item
        else:
            parts.append(f".{part}" if parts else str(part))
            node = node.get(part) if isinstance(node, dict) else None
    return "".join(parts) or "(top level)"


NAME_MAX = 255  # bytes of one file name (ext4, xfs, btrfs, NFS)
# The longest file name a run gives its name to (rules/common.smk, SCORED_RUN_OUTPUTS;
# tests/config/test_config.py checks that no rule's is longer), written through a temporary
# name (dualcog.atomic).
LONGEST_RUN_FILE = "{model}.outcomes.parquet"
RUN_NAME_MAX = NAME_MAX - (len(LONGEST_RUN_FILE) - len("{model}")) - TEMPORARY_NAME_EXTRA


def _check_run_name(name: str, source: str) -> None:
    """A run name (ASCII by the schema; a repeat's with its suffix) short enough for every
    file named after it."""
    if len(name) > RUN_NAME_MAX:
        shown = f"{name[:40]}...{name[-8:]}"  # the end too: a repeat's `~r<k>`
        raise ConfigError(
            f"invalid configuration in {source}: model {shown} field 'name': "
            f"{len(name)} characters, at most {RUN_NAME_MAX} (a run's longest file, "
            f"results/parsed/{LONGEST_RUN_FILE}, is written through a temporary name, and a "
            f"file name has at most {NAME_MAX} bytes)"
        )


def validate_config(config: Mapping[str, Any], source: str = "config") -> dict[str, Any]:
    """Validate against the JSON schema and return a copy with defaults and routes filled in."""
    if isinstance(config, Mapping) and "data_root" not in config:
        raise ConfigError(f"invalid configuration in {source}: {MISSING_DATA_ROOT}")
    schema, defaults, model_defaults = _schema()
    if isinstance(config, Mapping) and isinstance(config.get("models"), list):
        config = {**config, "models": fold_repeats(config["models"])}  # validated before
    _check(schema, config, config, source)
    merged = copy.deepcopy(defaults)
    for key, value in config.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = copy.deepcopy(value)
    variable = env_reference(merged["data_root"])
    if variable and variable in os.environ:
        merged["data_root"] = os.environ[variable]
    routes, routes_source = load_routes(merged)
    names: set[str] = set()
    models = []
    for model in merged["models"]:
        if model["name"] in names:
            raise ConfigError(f"invalid configuration in {source}: model {model['name']!r} twice")
        names.add(model["name"])
        try:
            resolved = resolve_model(model, routes, routes_source)
        except ConfigError as error:
            raise ConfigError(f"invalid configuration in {source}: {error}") from None
        _check_key(resolved, model, source, routes_source)
        _check_cost_limit(resolved, source)
        _check_batch(resolved, source)
        models.append({**model_defaults, **resolved})
    # A route value still `${VAR}` here names an unset variable: the preflight reports it.
    _check(schema, {**merged, "models": models}, merged, f"{source} (after routes)", True)
    models = expand_repeats(models, source)
    for run in models:  # a repeat's name has its `~r<k>` suffix by now
        _check_run_name(str(run["name"]), source)
    merged["models"] = select_models(models, merged.get("select"), source)
    return merged


def select_models(
    models: list[dict[str, Any]], patterns: list[str] | None, source: str
) -> list[dict[str, Any]]:
    """The models matching any `select` pattern: a glob over run names, or `key:value` for
    `group`, `channel`, `family` or `backend` (e.g. `channel:local`). None keeps all.
    A repeat set's name selects all its repeats; a repeat's own name, that repeat alone."""
    if not patterns:
        return models
    chosen = []
    for pattern in patterns:
        if not any(_selects(pattern, model) for model in models):
            raise ConfigError(
                f"invalid configuration in {source}: select {pattern!r} matches no model"
            )
    for model in models:
        if any(_selects(pattern, model) for pattern in patterns):
            chosen.append(model)
    return chosen


def _selects(pattern: str, model: Mapping[str, Any]) -> bool:
    key, sep, value = pattern.partition(":")
    if sep and key in SELECT_KEYS:
        return str(model.get(key)) == value
    names = [str(model["name"]), *([str(model[REPEAT_OF])] if model.get(REPEAT_OF) else [])]
    return any(fnmatch.fnmatchcase(name, pattern) for name in names)


def _check(schema: dict, config: Any, named: Any, source: str, unset_ok: bool = False) -> None:
    import jsonschema  # here: jobs read the validated config and never load it

    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: list(e.absolute_path))
    if unset_ok:
        errors = [e for e in errors if not env_reference(e.instance)]
    if errors:
        lines = [f"- {_location(e, config)}: {_message(e)}" for e in errors[:20]]
        raise ConfigError(f"invalid configuration in {source}:\n" + "\n".join(lines))


def _message(error: jsonschema.ValidationError) -> str:
    # A pattern alone does not say what is wrong; the property's description does.
    if error.validator == "pattern" and "description" in error.schema:
        return f"{error.message}: {error.schema['description']}"
    return error.message


def _check_key(
    resolved: Mapping[str, Any], model: Mapping[str, Any], source: str, routes_source: str
) -> None:
    key = resolved.get("api_key")
    if key and key != "EMPTY" and not env_reference(key):
        where = source if model.get("api_key") else f"its route in {routes_source}"
        raise ConfigError(
            f"invalid configuration in {where}: models ({resolved['name']}).api_key must be "
            "'${VAR}' (read from the environment) or 'EMPTY'; literal keys are refused so "
            "that they never reach results or logs"
        )


def _check_cost_limit(resolved: Mapping[str, Any], source: str) -> None:
    """`cost_limit` counts dollars from token usage, so it needs the model's prices (on the
    model or its route, hence checked after the routes are merged)."""
    if resolved.get("cost_limit") is not None and not resolved.get("prices"):
        raise ConfigError(
            f"invalid configuration in {source}: models ({resolved['name']}).cost_limit needs "
            "prices to count dollars: set `prices: {input: ..., output: ...}` (USD per million "
            "tokens) on the model or its route, or use `token_limit` instead"
        )


def _check_batch(resolved: Mapping[str, Any], source: str) -> None:
    if not resolved.get("batch"):
        return
    name, backend = resolved["name"], backend_of(resolved)
    if not backend.batches:
        raise ConfigError(
            f"invalid configuration in {source}: models ({name}).batch: backend {backend.name} "
            "sends no requests through a Batch API; `batch: true` needs an openai model"
        )
    if resolved.get("serve"):
        raise ConfigError(
            f"invalid configuration in {source}: models ({name}).batch: a model the workflow "
            "serves itself (`serve`) has no Batch API; drop `batch` or the `serve` block"
        )
    limited = [key for key in ("cost_limit", "token_limit") if resolved.get(key) is not None]
    if limited and not resolved.get("estimated_tokens_per_request"):
        raise ConfigError(
            f"invalid configuration in {source}: models ({name}).batch with "
            f"{' and '.join(limited)} needs estimated_tokens_per_request: a batch is checked "
            "against the limit before it is sent, at that many tokens per request"
        )


def load_routes(config: Mapping[str, Any]) -> tuple[dict[str, dict[str, Any]] | None, str]:
    """Routes of `routes_file` overlaid by inline `routes:` (None when neither is given)."""
    routes: dict[str, dict[str, Any]] | None = None
    sources = []
    if config.get("routes_file"):
        routes = read_routes_file(config["routes_file"])
        sources.append(str(config["routes_file"]))
    if config.get("routes"):
        routes = {**(routes or {}), **copy.deepcopy(dict(config["routes"]))}
        sources.append("the config's routes")
    return routes, " and ".join(sources) or "no routes"


def read_config_file(path: str | Path) -> dict[str, Any]:
    """The mapping of a config file; a ConfigError naming the file (and line) otherwise."""
    data = read_yaml(path, "config file")
    if not isinstance(data, Mapping):
        raise ConfigError(f"config file {path}: the top level must be a mapping of keys")
    return dict(data)


def load_config(path: str | Path) -> dict[str, Any]:
    return validate_config(read_config_file(path), str(path))


def model_by_name(config: Mapping[str, Any], name: str) -> dict[str, Any]:
    for model in config["models"]:
        if model["name"] == name:
            return model
    raise ConfigError(f"no model named {name!r} in the configuration")


def model_tasks(config: Mapping[str, Any], model: Mapping[str, Any]) -> list[str]:
    """Request kinds a model runs: its own `tasks` within the workflow's, in registry order."""
    chosen = set(model.get("tasks") or config["tasks"]) & set(config["tasks"])
    return [kind.task for kind in REQUEST_KINDS if kind.task in chosen]


def answer_settings(model: Mapping[str, Any]) -> dict[str, Any]:
    """The model settings that can change its answers (no secrets, no throughput knobs)."""
    settings = {k: v for k, v in sorted(model.items()) if k not in non_answer_keys()}
    if isinstance(settings.get("serve"), Mapping):
        serve = settings["serve"]
        settings["serve"] = {k: serve[k] for k in SERVE_ANSWER_KEYS if k in serve}
    return settings


def model_fingerprint(model: Mapping[str, Any]) -> str:
    payload = json.dumps(answer_settings(model), sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def is_video_task(task: str) -> bool:
    return REQUEST_BY_TASK[task].modality == "video"


def main(argv: list[str] | None = None) -> int:
    """`python -m dualcog.config FILE...`: validate config files, naming file and line of a
    YAML mistake (Snakemake reads `--configfile` itself and names neither; the console adds it)."""

    failed = 0
    for path in sys.argv[1:] if argv is None else argv:
        try:
            config = load_config(path)
        except ConfigError as error:
            print(error, file=sys.stderr)
            failed += 1
        else:
            print(f"{path}: valid ({len(config['models'])} model runs)")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
