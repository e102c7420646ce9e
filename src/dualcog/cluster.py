"""Job caps per API provider, so that each API is hit by a bounded number of jobs at once.

Every inference job of a model that calls an API holds one unit of the Snakemake resource
`api_<provider>`; `--resources api_<provider>=K` (or a profile's `resources:`) then lets at
most K such jobs run at a time, across all models, tasks and shards of that provider.
The provider is the model's `provider` setting, else derived from its `api_base`:
`${OPENROUTER_BASE}` -> `openrouter_base`, `https://api.openai.com/v1` -> `openai_com`,
`http://127.0.0.1:8000/v1` -> `127_0_0_1_8000`. Offline, replay and served models (`serve:`,
run by the workflow itself) call no API.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from dualcog.backends import calls_provider
from dualcog.routes import env_reference


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def provider_of(model: Mapping[str, Any]) -> str | None:
    """The provider a model's requests go to, or None for models that call no API."""
    if not calls_provider(model):
        return None  # offline, replayed, or a server the workflow runs itself
    if model.get("provider"):
        return str(model["provider"])
    api_base = str(model.get("api_base") or "")
    variable = env_reference(api_base)
    if variable:
        return _slug(variable)
    parts = urlsplit(api_base if "//" in api_base else f"//{api_base}")
    host = (parts.hostname or "").removeprefix("api.")
    name = _slug(f"{host}_{parts.port}" if parts.port else host)
    return name or "unknown"


def api_resource(provider: str) -> str:
    return f"api_{provider}"


def provider_resources(models: Iterable[Mapping[str, Any]]) -> list[str]:
    """The `api_<provider>` resource names of the configured models, sorted."""
    return sorted({api_resource(p) for m in models if (p := provider_of(m)) is not None})


def provider_slot(model: Mapping[str, Any], resource: str) -> int:
    """1 when the model's jobs count against `resource`, else 0."""
    provider = provider_of(model)
    return int(provider is not None and api_resource(provider) == resource)


@dataclass(frozen=True)
class ApiCaps:
    """The caps a job running many providers' (run, task) units keeps inside itself."""

    per_provider: dict[str, int | None]  # units of one provider at once; None: no cap
    total: int | None  # units of all providers at once (`api_slots`); None: no cap
    job_resources: dict[str, int]  # what the job holds of Snakemake's resources: every cap


def _value(resource: Any) -> int | None:
    value = getattr(resource, "value", resource)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def provider_caps(resources: Mapping[str, Any], providers: Iterable[str]) -> ApiCaps:
    """`api_<provider>` and `api_slots` of Snakemake's global resources (--resources or a
    profile's `resources:`; values as ints or Snakemake `Resource`s) for `providers`."""
    per_provider = {p: _value(resources.get(api_resource(p))) for p in sorted(providers)}
    total = _value(resources.get("api_slots"))
    held = {api_resource(p): cap for p, cap in per_provider.items() if cap is not None}
    if total is not None:
        held["api_slots"] = total
    return ApiCaps(per_provider, total, held)
