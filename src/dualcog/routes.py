"""Model routes: where a run's requests go, read from a routes file in either of two formats.

A run name such as `Qwen3.5-9B-Instant` is split into its route key (`Qwen3.5-9B`) and its mode
(`Instant`); the route gives the endpoint, key and rate limits, the model family turns the mode
into the provider's request switch (see docs/configuration.md, "Routes").

Two file formats are read:

- the benchmark authors' runtime file (`common_api_runtime.yaml`): `api.models.<route key>` with
  `api_source`, `api_base` (or `base_url`), `api_key` (or `key`), `request_model`, `rpm_limit`,
  `tpm_limit`, `rate_limit_reserve_ratio`, `estimated_tokens_per_request`; other keys of theirs
  are ignored;
- ours: `routes.<route key>` holding any model setting (`api_base`, `api_key`, `family`,
  `channel`, `serve`, rate limits, ...), checked against the model schema.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dualcog.backends import backend_of
from dualcog.errors import ConfigError
from dualcog.switches import (
    CONFIG_FAMILIES,
    SwitchError,
    authors_family,
    canonical_family,
    effective_family,
    mode_switch,
    split_mode,
)

# The authors' field names -> ours. Only these are read from their file.
AUTHORS_FIELDS = {
    "api_source": "api_source",
    "api_base": "api_base",
    "base_url": "api_base",
    "api_key": "api_key",
    "key": "api_key",
    "request_model": "request_model",
    "rpm_limit": "rpm_limit",
    "tpm_limit": "tpm_limit",
    "rate_limit_reserve_ratio": "rate_limit_reserve_ratio",
    "estimated_tokens_per_request": "estimated_tokens_per_request",
}
# Fields resolved from the environment only when a request is sent (never stored resolved).
SECRET_FIELDS = ("api_key", "api_base")
# Non-secret fields that may be given as `${VAR}`: read once at start-up, so that the value
# (which can change answers) is part of the run's settings.
STARTUP_TEXT_FIELDS = ("request_model", "thinking_system_prefix")
NUMERIC_FIELDS = (
    "rpm_limit",
    "tpm_limit",
    "rate_limit_reserve_ratio",
    "estimated_tokens_per_request",
)
LOCAL_SOURCES = frozenset({"local", "vllm", "localhost"})
ENV_REFERENCE = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")


def env_reference(value: Any) -> str | None:
    """The variable name of a value that is exactly `${VAR}`, else None."""
    if not isinstance(value, str):
        return None
    match = ENV_REFERENCE.match(value)
    return match.group(1) if match else None


def resolve_env_value(value: str | None, field: str) -> str | None:
    """Read a value that is exactly `${VAR}` from the environment; other values pass through.

    The error names the variable and the field, never a value.
    """
    if value is None:
        return None
    name = env_reference(str(value))
    if name is None:
        return str(value)
    if name not in os.environ:
        raise ValueError(f"model config field {field!r} refers to ${{{name}}}, which is not set")
    return os.environ[name]


def read_yaml(path: str | Path, what: str) -> Any:
    """The document of a YAML (or JSON) file; a ConfigError naming `what`, the file and the
    line when it is missing, empty, not UTF-8 or not YAML."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{what} {path} does not exist")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        line = path.read_bytes()[: error.start].count(b"\n") + 1
        raise ConfigError(f"{what} {path}, line {line}: not UTF-8 text") from None
    import yaml  # here: jobs that only look a model up never load it

    try:
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = error.problem or error.context or "not valid YAML"
        raise ConfigError(f"{what} {path}{where}: not valid YAML ({problem})") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{what} {path}: not valid YAML ({error})") from None
    if data is None:
        raise ConfigError(f"{what} {path} is empty")
    return data


def read_routes_file(path: str | Path) -> dict[str, dict[str, Any]]:
    """Route key -> settings in our field names, from a file in either format."""
    path = Path(path)
    data = read_yaml(path, "routes_file")
    if not isinstance(data, Mapping):
        raise ConfigError(f"routes_file {path}: the top level must be a mapping")
    if "routes" in data:
        routes = data["routes"]
        if not isinstance(routes, Mapping):
            raise ConfigError(f"routes_file {path}: `routes` must map route keys to settings")
        return {str(k): dict(v or {}) for k, v in routes.items()}
    api = data.get("api")
    models = api.get("models") if isinstance(api, Mapping) else None
    if not isinstance(models, Mapping):
        raise ConfigError(
            f"routes_file {path}: neither `routes:` (our format) nor `api.models:` "
            "(the authors' common_api_runtime.yaml format) found"
        )
    return {str(key): authors_route(path, str(key), entry) for key, entry in models.items()}


def authors_route(path: Path, key: str, entry: Any) -> dict[str, Any]:
    """One `api.models.<key>` entry of the authors' file in our field names."""
    if not isinstance(entry, Mapping):
        raise ConfigError(f"routes_file {path}: api.models.{key} must be a mapping")
    route: dict[str, Any] = {}
    for theirs, ours in AUTHORS_FIELDS.items():
        if theirs in entry and entry[theirs] is not None and ours not in route:
            route[ours] = entry[theirs]
    source = str(route.get("api_source", "")).strip().lower()
    route["channel"] = "local" if source in LOCAL_SOURCES else "api"
    return route


def route_key_of(model: Mapping[str, Any]) -> str:
    return str(model.get("route") or split_mode(str(model["name"]))[0])


def resolve_model(
    model: Mapping[str, Any],
    routes: Mapping[str, Mapping[str, Any]] | None,
    routes_source: str,
) -> dict[str, Any]:
    """A model entry completed from its route; the model's own settings win.

    Raises ConfigError naming the model for an unknown route and for a mode suffix whose
    family is not known.
    """
    name = str(model["name"])
    resolved = copy.deepcopy(dict(model))
    if not backend_of(resolved).calls_api:
        return resolved
    key = route_key_of(model)
    has_endpoint = bool(model.get("api_base") or model.get("serve"))
    route = (routes or {}).get(key)
    if route is None and (model.get("route") or not has_endpoint):
        if routes is None:
            raise ConfigError(
                f"model {name}: no api_base, serve block or routes_file to reach it "
                f"(route key {key!r})"
            )
        known = ", ".join(sorted(routes)[:12])
        raise ConfigError(
            f"model {name}: no route {key!r} in {routes_source} (the run name without its "
            f"-Instant/-Thinking/-Reasoning suffix, or the model's `route:`); routes there: "
            f"{known}{' ...' if len(routes) > 12 else ''}"
        )
    if route is not None:
        for field, value in route.items():
            resolved.setdefault(field, copy.deepcopy(value))
        resolved.setdefault("request_model", key)
    read_startup_values(resolved)
    if not (resolved.get("api_base") or resolved.get("serve")):
        raise ConfigError(f"model {name}: route {key!r} gives no api_base (and no serve block)")
    family = decide_family(resolved)
    if family is None:
        resolved.pop("family", None)
    else:
        resolved["family"] = family
    if resolved.get("channel") is None:
        resolved["channel"] = "local" if resolved.get("serve") else "api"
    return resolved


def decide_family(model: Mapping[str, Any]) -> str | None:
    """The family that switches a model's mode (PROTOCOL §11.2): the authors' rules on the base
    name; the configured `family:` where they recognise none, or with `override_family: true`.

    Raises ConfigError naming the model and the field for a configured family that would send
    another switch than the rules (unless overridden), for a suffix with no family at all, and
    for a `-Thinking-High` name whose route sends no reasoning object.
    """
    name = str(model["name"])
    suffix = split_mode(name)[1]
    base = route_key_of(model)  # the authors' base name: their run name less its suffix
    configured = canonical_family(model.get("family"))
    if configured is not None and configured not in CONFIG_FAMILIES:
        raise ConfigError(
            f"model {name}: family: {model.get('family')!r} is not a family "
            f"(one of {', '.join(CONFIG_FAMILIES)})"
        )
    ruled = authors_family(base)
    override = bool(model.get("override_family"))
    if override and configured is None:
        raise ConfigError(f"model {name}: override_family: true needs a `family:` to use")
    family, by_name = effective_family(base, configured, override)
    if ruled is not None and configured is not None and not override:
        # A configured family contradicts the rules when it would switch either mode
        # differently; an equivalent spelling (openrouter for claude) is accepted.
        for mode in ("Instant", "Thinking"):
            wanted = mode_switch(base, ruled, mode)
            given = mode_switch(base, configured, mode, by_name=False)
            if wanted != given:
                raise ConfigError(
                    f"model {name}: family: {configured} contradicts the authors' rules, which "
                    f"make {base!r} family {ruled} (its -{mode} would send "
                    f"{wanted.describe()}, not {given.describe()}); remove `family:` or set "
                    "`override_family: true`"
                )
    if suffix is not None and family is None:
        raise ConfigError(
            f"model {name}: its -{suffix} suffix needs a family to say how to switch it; the "
            f"authors' rules recognise none in {base!r}: set `family:` on the model"
        )
    try:
        mode_switch(base, family, suffix, by_name=by_name)
    except SwitchError as error:
        raise ConfigError(f"model {name}: {error}") from None
    return family


def read_startup_values(model: dict[str, Any]) -> None:
    """Replace `${VAR}` in non-secret fields by the variable's value, in place.

    An unset variable is left as it is for the preflight to report with the others.
    """
    name = str(model["name"])
    for field in (*STARTUP_TEXT_FIELDS, *NUMERIC_FIELDS):
        variable = env_reference(model.get(field))
        if variable and variable in os.environ:
            value = os.environ[variable]
            model[field] = (
                _number(value, name, field, variable) if field in NUMERIC_FIELDS else value
            )
    serve = model.get("serve")
    if isinstance(serve, dict):
        variable = env_reference(serve.get("model"))
        if variable and variable in os.environ:
            model["serve"] = {**serve, "model": os.environ[variable]}


def _number(text: str, name: str, field: str, variable: str) -> float | int:
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(
            f"model {name}: {field} is ${{{variable}}}, which is not a number"
        ) from None
    return int(value) if value.is_integer() else value
