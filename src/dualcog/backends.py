"""The backend registry: every inference backend, declared once with what it needs.

The rest of the code asks a model's backend for a property (`backend_of(model).sends_media`,
`is_served(model)`, ...) and never compares backend names; tests/inference/test_backends.py
checks that no backend name is compared outside this module. Adding a backend is one
`register(Backend(...))` here plus its runner (docs/extending.md); the runner of a backend that
calls an API is `dualcog.inference.engine.transport_runner` of its transport.

A runner is named as "module:function" and imported when a job first runs it, so that offline
and replayed jobs never load the HTTP stack. Its signature is `Runner`: the model's config
entry, the prompt rows (one task or several, sample ids unique) and the `RunInputs`; it returns
one RESPONSES row per prompt row, in order.

This module imports nothing heavy: the Snakefile, the tables and the cluster profile use it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dualcog.errors import ConfigError


@dataclass(frozen=True)
class RunInputs:
    """What a runner may read besides the model and its prompts."""

    # The SAMPLES rows of the prompts' tasks (gold-aware backends read them): Arrow's
    # `to_pylist()` rows, or a frame's records (whose list cells are numpy arrays).
    samples: list[dict[str, Any]]
    media_store: Path  # prepared images and videos (backends that send media)
    cache_dir: Path  # response caches, budgets and outcomes
    progress: Callable[[str], None] | None = None


Runner = Callable[[Mapping[str, Any], list[dict[str, Any]], RunInputs], list[dict[str, Any]]]


@dataclass(frozen=True)
class Backend:
    """One backend and what the workflow must do for it.

    name: the `backend` value of a model's config entry.
    runner: "module:function" of its `Runner`.
    sends_media: its requests carry images and videos, so the media store must be prepared
        and complete before its jobs run (scripts/infer.py checks).
    calls_api: its requests go to an OpenAI-compatible endpoint: a route (routes_file)
        completes its entry, and without a `serve` block it takes an API slot and rate budget
        of its provider (dualcog.cluster).
    servable: a `serve` block makes the workflow start the server itself: one rule per served
        group (rules/serve.smk, scripts/infer_served.py) instead of `infer`.
    counts_failures: its requests can fail (transport, HTTP, refusals): each job's outcome is
        assessed against `max_error_rate`, written beside the cache and reported, and a job past
        it fails so that a rerun retries (dualcog.inference.outcome). A backend whose failures
        are not counted reports success whatever its rows say.
    run_per_model: one job per run answers all its tasks and scores them (rule
        `infer_run*`, scripts/infer_run.py) rather than one job per (run, task) (rule
        `infer`, scripts/infer.py) and one to score (rule `score`): for backends that answer
        in milliseconds, where a job per step would cost a process start-up each. Its
        runner gets no media store and no cache, so it neither sends media nor counts
        failures; a sharded run still runs per task.
    reads_samples: its runner reads the SAMPLES rows of the prompts' tasks (gold-aware
        answers): the job reads every column of the samples, not only those scoring reads.
    input_field: the config field naming files the runner reads (a path or a list): they are
        Snakemake inputs of its jobs and preflight checks that they exist.
    required: config fields an entry of this backend must set.
    simulated: its answers are made up from the gold (tables and legends mark the label).
    recorded: its answers are recorded responses (the leaderboard marks them "replayed").
    reports_usage: its rows carry a provider's token usage (sent, or recorded with the
        answers); the usage table shows "–" for a backend that reports none, never 0.
    batches: `batch: true` sends its requests through the provider's Batch API
        (dualcog.inference.batch) instead of one by one; refused with a `serve` block.
    samples: its answers vary from run to run (a sampling model, or a built-in backend that
        draws them from a seed), so `repeats: k` makes k independent runs (dualcog.repeats);
        a backend that answers the same every time (the gold, a recording) refuses repeats.
    """

    name: str
    runner: str
    description: str
    sends_media: bool = False
    calls_api: bool = False
    servable: bool = False
    counts_failures: bool = False
    run_per_model: bool = False
    reads_samples: bool = False
    input_field: str | None = None
    required: tuple[str, ...] = ()
    simulated: bool = False
    recorded: bool = False
    reports_usage: bool = False
    batches: bool = False
    samples: bool = False

    def load_runner(self) -> Runner:
        module, _, function = self.runner.partition(":")
        return getattr(importlib.import_module(module), function)


REGISTRY: dict[str, Backend] = {}


def register(backend: Backend) -> Backend:
    """Add a backend; a name is registered once."""
    if backend.name in REGISTRY:
        raise ValueError(f"backend {backend.name!r} is registered twice")
    if backend.run_per_model and (backend.sends_media or backend.counts_failures):
        raise ValueError(
            f"backend {backend.name!r}: a per-run job has no media store and no outcome check "
            "(run_per_model excludes sends_media and counts_failures)"
        )
    REGISTRY[backend.name] = backend
    return backend


register(Backend(
    "oracle", "dualcog.inference.offline:run_oracle",
    "the gold answer of every sample (an upper bound; checks scoring end to end)",
    run_per_model=True, reads_samples=True,
))  # fmt: skip
register(Backend(
    "random", "dualcog.inference.offline:run_random",
    "a uniformly random valid answer per sample (the chance baseline)",
    run_per_model=True, reads_samples=True, samples=True,
))  # fmt: skip
register(Backend(
    "simulated", "dualcog.inference.offline:run_simulated",
    "gold-aware answers with a given skill and output quirks (demos and tests)",
    run_per_model=True, reads_samples=True, simulated=True, samples=True,
))  # fmt: skip
register(Backend(
    "replay", "dualcog.inference.replay:run_replay",
    "responses read from recorded files (ours, or the authors' responses.jsonl)",
    run_per_model=True, input_field="replay", required=("replay",), recorded=True,
    reports_usage=True,
))  # fmt: skip
register(Backend(
    "openai", "dualcog.inference.openai_backend:run_openai",
    "OpenAI-compatible Chat Completions: cloud APIs, or a vLLM server the workflow starts",
    sends_media=True, calls_api=True, servable=True, counts_failures=True,
    reports_usage=True, batches=True, samples=True,
))  # fmt: skip

BACKEND_NAMES = tuple(REGISTRY)


def backend_named(name: str) -> Backend:
    try:
        return REGISTRY[name]
    except KeyError:
        raise ConfigError(f"unknown backend {name!r} (one of {', '.join(REGISTRY)})") from None


_DECLARES_NOTHING = Backend("", "", "no registered backend")


def declared(name: str | None) -> Backend:
    """The entry of `name`, or one declaring nothing when `name` is not registered (tables of
    hand-written model lists, where a label mark is all that is asked)."""
    return REGISTRY.get(name or "", _DECLARES_NOTHING)


def backend_of(model: Mapping[str, Any]) -> Backend:
    """The backend of a model's config entry; ConfigError naming the model when unknown."""
    name = model.get("backend")
    if name not in REGISTRY:
        raise ConfigError(
            f"model {model.get('name')!r}: unknown backend {name!r} (one of {', '.join(REGISTRY)})"
        )
    return REGISTRY[name]


def is_served(model: Mapping[str, Any]) -> bool:
    """The workflow starts this run's server itself (a `serve` block on a servable backend)."""
    return backend_of(model).servable and bool(model.get("serve"))


def calls_provider(model: Mapping[str, Any]) -> bool:
    """This run's requests take a provider's API slot and rate budget (not a server of ours)."""
    return backend_of(model).calls_api and not model.get("serve")


def any_sends_media(models: Iterable[Mapping[str, Any]]) -> bool:
    """Some run sends media: only then do images and videos need preparing."""
    return any(backend_of(model).sends_media for model in models)


def input_files(model: Mapping[str, Any]) -> list[str]:
    """The files the backend's runner reads for this run (its `input_field`), as given."""
    field = backend_of(model).input_field
    value = model.get(field) if field else None
    if not value:
        return []
    return [str(value)] if isinstance(value, (str, Path)) else [str(v) for v in value]


def sampling_backends() -> list[str]:
    """Backends whose answers vary between runs (`repeats` is allowed on them)."""
    return [backend.name for backend in REGISTRY.values() if backend.samples]


def missing_fields(model: Mapping[str, Any]) -> list[str]:
    """Config fields the backend requires that the entry leaves unset."""
    return [field for field in backend_of(model).required if not model.get(field)]
