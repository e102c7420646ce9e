"""Workflow configuration: loading, schema validation with readable messages, defaults."""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from dualcog.errors import ConfigError
from dualcog.tasks import REQUEST_BY_TASK, REQUEST_KINDS

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "config" / "schemas" / "config.schema.yaml"

DEFAULTS: dict[str, Any] = {
    "tasks": [kind.task for kind in REQUEST_KINDS],
    "cache_dir": "results/cache",
    "media": {
        "max_width": 640,
        "max_height": 480,
        "jpeg_quality": 80,
        "store": "results/media/store",
    },
    "tables": {"formats": ["csv", "md"]},
    "bootstrap": {"replicates": 1000, "seed": 0, "level": 0.95},
    "compare": [],
}
MODEL_DEFAULTS: dict[str, Any] = {
    "group": "baseline",
    "reasoning_only": False,
    "video_mode": "video_url",
    "video_frames": 16,
    "temperature": 0.0,
    "max_tokens": 2048,
    "seed": 0,
}
# Settings that change how fast answers arrive, never what they say: left out of the
# fingerprint so that tuning them does not rerun a model.
NON_ANSWER_KEYS = frozenset(
    {
        "api_key",
        "display_name",
        "group",
        "reasoning_only",
        "rpm_limit",
        "tpm_limit",
        "estimated_tokens_per_request",
        "rate_limit_reserve_ratio",
        "concurrency",
        "max_retries",
        "timeout",
        "bbox_scale",
        "tasks",
        # endpoint and credentials: a local server on a new port answers the same
        "key",
        "api_base",
        "base_url",
        "api_source",
        "rate_limit_burst",
        "rate_limit_window_s",
        "max_error_rate",
        "retry_backoff_s",
        "retry_backoff_max_s",
        "progress_every_s",
        "notes",
        "description",
    }
)
_ENV_REFERENCE = re.compile(r"^\$\{[A-Za-z_][A-Za-z0-9_]*\}$")


def load_schema(path: Path = SCHEMA_PATH) -> dict:
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


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


def validate_config(config: Mapping[str, Any], source: str = "config") -> dict[str, Any]:
    """Validate against the JSON schema and return a copy with defaults filled in."""
    validator = jsonschema.Draft202012Validator(load_schema())
    errors = sorted(validator.iter_errors(config), key=lambda e: list(e.absolute_path))
    if errors:
        lines = [f"- {_location(e, config)}: {e.message}" for e in errors[:20]]
        raise ConfigError(f"invalid configuration in {source}:\n" + "\n".join(lines))
    merged = copy.deepcopy(DEFAULTS)
    for key, value in config.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = copy.deepcopy(value)
    names: set[str] = set()
    models = []
    for model in merged["models"]:
        if model["name"] in names:
            raise ConfigError(f"invalid configuration in {source}: model {model['name']!r} twice")
        names.add(model["name"])
        key = model.get("api_key")
        if key and key != "EMPTY" and not _ENV_REFERENCE.match(key):
            raise ConfigError(
                f"invalid configuration in {source}: models ({model['name']}).api_key must be "
                "'${VAR}' (read from the environment) or 'EMPTY'; literal keys are refused so "
                "that they never reach results or logs"
            )
        models.append({**MODEL_DEFAULTS, **model})
    merged["models"] = models
    return merged


def load_config(path: str | Path) -> dict[str, Any]:
    with open(path, encoding="utf-8") as handle:
        raw = yaml.safe_load(handle) or {}
    return validate_config(raw, str(path))


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
    return {k: v for k, v in sorted(model.items()) if k not in NON_ANSWER_KEYS}


def model_fingerprint(model: Mapping[str, Any]) -> str:
    payload = json.dumps(answer_settings(model), sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def is_video_task(task: str) -> bool:
    return REQUEST_BY_TASK[task].modality == "video"
